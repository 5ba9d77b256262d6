package wsconn

// SendWaiting reports whether some Send is blocked waiting for queue space, so
// tests can tell a blocked Send from one that has not started.
func (c *Conn) SendWaiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// DataQueueFull reports whether the data frame queue is at capacity, so a test can
// tell a backlog that fills it from a Send that was merely slow.
func (c *Conn) DataQueueFull() bool { return len(c.data) == cap(c.data) }
