package wsconn

// SendWaiting reports whether some Send is blocked waiting for queue space, so
// tests can tell a blocked Send from one that has not started.
func (c *Conn) SendWaiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// DataQueueFull reports whether the queued data leaves no room for another
// kilobyte, so a test can tell a backlog that fills the queue from a Send that
// was merely slow.
func (c *Conn) DataQueueFull() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued+1024 > c.opts.QueueBytes
}
