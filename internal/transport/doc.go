// Package transport holds the app transports that are not WebSocket: the
// sockets of tcp:// and sse:// apps, each presented to its session as the
// app side of a WebSocket connection (internal/wsconn is the WebSocket
// one), so that replay, sequencing, the outbox and the limits apply to
// every kind of app alike. The listeners that accept them, and admission,
// belong to package proxy.
//
// It owns:
//
//   - LineConn (lines.go): a tcp:// app. Each line the app writes is one
//     text message; each message to the app is written as one line, binary
//     messages and line breaks following BinaryPolicy and NewlinePolicy
//     (policy.go). A broken line rule ends the reader with *LineError, a
//     disconnect inside a line with *PartialLineError.
//   - SSEApp (sseapp.go): an sse:// app, which outlives the app's HTTP
//     requests. Its events are numbered with ids "<token>-<n>" (sseid.go)
//     and kept in a bounded replay log (sselog.go), so an EventSource that
//     reconnects with its Last-Event-ID within SSEOptions.Linger resumes
//     after its last event; one that cannot be resumed gets a tether-gap
//     event saying why. Each request is an SSEAttachment, written by its
//     own handler goroutine (Stream, ssestream.go).
//
// Both queue what they write towards the app through a sendq.Queue, as
// wsconn does: the same byte bound (Send and SendBatch block while it is
// full, the back-pressure on upstream reads), the same batches (Append
// outside the lock, SendBatch under it) and the same closing rules. The
// errors a session inspects are exported (errors.go) and checked with
// errors.Is and errors.As; the drop reasons they report are the
// tether_app_dropped_total labels of labels.go.
//
// Concurrency contract: ReadMessage is called by one goroutine, the
// session's reader. Send, SendBatch, Close, Abort, Done and Queued are safe
// for concurrent use; Append is called by whoever holds the batch (one
// goroutine at a time). A LineConn owns its writer goroutine, which ends
// after Close has finished or after Abort (Done is closed then). An
// SSEApp starts no goroutine: its writers are the request handlers that
// call Stream, and a timer (SSEOptions.Linger) ends a session nobody comes
// back to; Done is closed once it is over and the last request has ended.
// Nothing here depends on package proxy.
package transport
