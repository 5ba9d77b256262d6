// Package wsconn is tether's WebSocket connection: one reader, one writer and the
// RFC 6455 rules between them, used on both sides of the proxy (the app socket, where
// tether is the server, and the upstream socket, where tether is the client).
//
// It exists because gobwas/ws leaves framing policy to its users (see GOBWAS.md in
// the design notes): the library has no locking, its helpers write control replies
// from the reading goroutine, and its limits default to unlimited. Conn fixes those
// choices once:
//
//   - Reading: ReadMessage reassembles fragmented messages into one reused buffer,
//     enforces MaxMessageBytes (close 1009), validates UTF-8 of text (close 1007) and
//     the framing rules (close 1002), and handles control frames itself: a ping
//     queues a pong to the writer, a close is echoed and returned as *CloseError.
//   - Writing: every frame, data or control, is written by the connection's single
//     writer goroutine. Send copies the message into a pooled buffer, so callers may
//     reuse theirs; the queue is bounded by QueueBytes and Send blocks beyond it,
//     which is how backpressure reaches the caller. The writer flushes when its
//     queue is empty, so sparse traffic costs one write per message and a backlog is
//     written in large batches.
//
// Concurrency contract: ReadMessage must be called from one goroutine at a time (the
// connection's reader). Send, Ping, Close, Abort, LastRead, Done and Err are safe for
// concurrent use. The writer goroutine is owned by the Conn: it ends after Close has
// finished its handshake or after Abort, and Done is closed when it has.
package wsconn
