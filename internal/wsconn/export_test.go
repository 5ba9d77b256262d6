package wsconn

// SendWaiting reports whether some Send is blocked waiting for queue space, so
// tests can tell a blocked Send from one that has not started.
func (c *Conn) SendWaiting() bool {
	return c.q.Waiting()
}

// DataQueueFull reports whether the queued data leaves no room for another
// kilobyte, so a test can tell a backlog that fills the queue from a Send that
// was merely slow.
func (c *Conn) DataQueueFull() bool {
	return c.q.Queued()+1024 > c.opts.QueueBytes
}
