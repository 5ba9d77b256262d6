// Package sendq is the bounded send queue of tether's sockets: the one
// mechanism by which a slow reader on one side pauses reading on the other.
// Each app transport (a WebSocket connection, a tcp:// line connection, an
// sse:// app) and the upstream WebSocket connection queue what they must
// write through one Queue, whose rules are the same everywhere:
//
//   - Byte bound: Reserve waits while the bytes queued leave no room for n
//     more (Fits), which is how back-pressure reaches the caller: the
//     upstream reader that forwards to a slow app stops reading. A queue
//     holding nothing takes any n, so one message larger than the limit
//     still goes through.
//   - Batches: a Batch is a run of messages encoded by the queue's owner
//     outside the lock, queued with one Reserve: one lock and at most one
//     wake-up of the writer per burst.
//   - One writer, woken once per burst: the first bytes queued for an idle
//     writer wake it (Options.Wake), or make their caller the writer; the
//     writer takes everything queued when it looks, and says it is idle
//     (IdleLocked) when it finds nothing.
//   - Closing: once closed, Reserve fails with the owner's own error
//     (Options.Closed), and senders blocked in Reserve return it at once.
//     What is already queued stays queued: the owner decides whether its
//     writer still writes it (a close) or drops it (an abort).
//
// A Queue does not hold the bytes: its owner keeps them in its own encoding
// (frames, lines, events kept for replay) and changes them only under the
// mutex it gave the Queue, as sync.Cond shares its Locker, so that what is
// stored and what is counted change together. Methods ending in Locked are
// called with that mutex held; the others take it.
//
// Buf is the pooled buffer owners encode into, so that the steady state
// allocates nothing and an idle socket holds no write buffer. RawWriter is
// the write that never waits, for an owner whose callers write what they
// queued themselves, on their own thread, while the writer is idle.
//
// Concurrency contract: a Queue is safe for concurrent use by its senders,
// its writer and whoever closes it, under the rules above. A Batch belongs
// to one goroutine at a time, and to one owner (its bytes are that owner's
// encoding). The package starts no goroutine.
package sendq
