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
// Concurrency contract: Run owns every goroutine it starts (the feed's
// servers and publisher, tether, the client's reader, the fault scheduler)
// and returns only after all of them have ended. The narrator is safe for
// concurrent use and serialises output lines. The client guards its state
// with its mutex and never holds it across network I/O or narration; the
// feed writes to its connections under its mutex, so a replay and the live
// events after it cannot interleave (the writes go to tether on loopback,
// and fail at once on a dead connection), and never narrates under it.
package demo
