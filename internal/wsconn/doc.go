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
//     A message that is one frame sitting whole in the read buffer (most of a
//     burst) is returned in place, without copying. MessageBuffered tells whether
//     the next message is already there, and ReadMessageFlushing calls a function
//     before any read that may wait: a reader that batches what it forwards
//     passes its batch on then.
//   - Writing: every frame, data or control, is written by the connection's single
//     writer. Send encodes the message straight into the queue (pooled
//     buffers of whole frames, under one lock), so callers may reuse theirs and a
//     message costs one copy and no channel operation; the queue is bounded by
//     QueueBytes and Send blocks beyond it, which is how backpressure reaches the
//     caller. The bound, the blocked senders and the writer's wake-up are a
//     sendq.Queue, the one every app transport of tether uses. Append encodes
//     messages into a sendq.Batch and SendBatch queues it under one lock, for a
//     reader forwarding a burst. The writer takes the whole queue at once and
//     writes it segment by segment (64 KiB), a ping or pong going ahead of the
//     next segment, and stops when nothing is queued: sparse traffic costs one
//     write per message, a backlog is written in large writes, and an idle
//     connection has no writer goroutine. The writer is the caller whose Send,
//     SendBatch or Ping found it idle: it writes inline, with writes that never
//     wait (one write(2) each, on a socket that gives its descriptor), so a
//     reader forwarding a burst writes it on its own thread. What the socket
//     does not take at once, the close frame and its CloseWait, pongs (the
//     reader's), and every write of a TLS socket go to a writer goroutine,
//     started then and gone once the queue is empty.
//   - Memory: the read buffer is borrowed from a pool while bytes wait in it
//     and given back before the reader waits (a plain socket is waited on
//     through the runtime's poller, a TLS one with a one-byte read), the
//     buffer a message is reassembled or inflated in is borrowed for that
//     message and given back at the next read, and the write buffers only
//     exist while something is queued, so an idle connection holds none of
//     them. With Options.Account, what the reader borrows counts on it while
//     it holds it, never waiting (Held), as does what context takeover keeps
//     for the next compressed message; all of it is given back when the
//     connection ends. crypto/tls keeps its own input buffer per connection,
//     grown for the largest records seen (some 38 KiB once 16 KiB records
//     arrived, with Go 1.26), which no API of it lets go.
//
// Concurrency contract: ReadMessage, ReadMessageFlushing and MessageBuffered must be
// called from one goroutine at a time (the connection's reader). Send, SendBatch,
// Append, Ping, Close, Abort, LastRead, WriteProgress, Unread, Held, Done and Err are safe
// for concurrent use, and none of them waits on a slow peer (Send and SendBatch
// wait only for room in the queue); a Batch itself belongs to one goroutine at a
// time. The writer goroutine is owned by the Conn and runs only while something is
// queued that the socket did not take inline: none is left after Close has finished
// its handshake or after Abort, and Done is closed then.
package wsconn
