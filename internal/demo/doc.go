// Package demo owns `tether demo`: a flaky upstream price feed, a fault
// scheduler that breaks it in the ways real upstreams break, a naive client
// that connects to tether once and never reconnects, and a narrator that
// prints, as readable lines, what failed, what tether did about it and what
// the client saw.
//
// tether itself is not part of this package: Run starts it through
// Options.Tether, which cmd/tether implements with the sidecar's own code
// path (LoadConfig and serveProxy), so the demo shows the real product. The
// narration of tether's actions comes from tether's real log entries: its
// zap logger is built on a zapcore.Core of this package that turns known
// entries ("upstream reconnect scheduled", "upstream confirmed", ...) into
// sentences.
//
// Pieces, one per file: feed.go (the upstream, on upstream/upstreamtest:
// a session, numbered events, a replay buffer and DESIGN.md's resume
// protocol), catchup.go (its HTTP catch-up endpoint), faults.go (the seeded
// fault plan and the scheduler), client.go and tracker.go (the naive client
// and its sequence accounting), tether.go (tether in its own goroutine),
// narrator.go, story.go and summary.go (the output), run.go (wiring and
// shutdown order).
//
// With Options.SSE, Run plays the Server-Sent Events demo instead, from
// files of its own: sse_feed.go (the upstream, on internal/sse/ssetest: an
// event stream numbered by id, opening with "retry: 1000", resuming after a
// Last-Event-ID), sse_faults.go (its faults: reset, dropped connection,
// silent stall, clean end, 503 with Retry-After, repeated events),
// sse_app.go (an EventSource-like app that reads tether's sse:// listener
// and, as a browser would, reconnects with Last-Event-ID if its stream
// ends, which behind tether it never should), sse_story.go and
// sse_summary.go (the words an event stream needs), sse_run.go (tether's
// SSE configuration and the wiring). The tracker, the narrator, the plan
// and tether's goroutine are shared.
//
// Concurrency contract: Run owns every goroutine it starts (the feed's
// servers and publisher, tether, the client's reader, the fault scheduler;
// in the SSE demo the feed's publisher and request watcher and the app's
// reader) and returns only after all of them have ended. The narrator is safe for
// concurrent use and serialises output lines. The client guards its state
// with its mutex and never holds it across network I/O or narration; the
// feed writes to its connections under its mutex, so a replay and the live
// events after it cannot interleave (the writes go to tether on loopback,
// and fail at once on a dead connection), and never narrates under it.
package demo
