// Package demo owns `tether demo`: a flaky upstream price feed, a fault
// scheduler that breaks it in the ways real upstreams break, a naive app
// that connects to tether once and never asks twice, and a narrator that
// prints, as readable lines, what failed, what tether did about it and what
// the app saw.
//
// tether itself is not part of this package: Run starts it through
// Options.Tether, which cmd/tether implements with the sidecar's own code
// path (LoadConfig and serveProxy), so the demo shows the real product. The
// narration of tether's actions comes from tether's real log entries: its
// zap logger is built on a zapcore.Core of this package that turns known
// entries ("upstream reconnect scheduled", "upstream confirmed", ...) into
// sentences.
//
// The demo is one story told over two transports. What differs is a mode
// (mode.go): its feed and its app behind two small interfaces, the faults
// its feed knows, and its words. websocket.go is `tether demo`: ws_feed.go
// (docs/design.md's resumable feed on gobwas/ws and internal/wsconn: a
// session, numbered events, resumes, and catchup.go's HTTP catch-up
// endpoint) and ws_client.go (a client that sends one subscription and
// never reconnects). sse.go is `tether demo -sse`: sse_feed.go (an event
// stream on net/http, numbered by id, opening with "retry: 1000", resuming
// after a Last-Event-ID) and sse_app.go (an EventSource-like app that, as a
// browser would, reconnects with Last-Event-ID if its stream ends, which
// behind tether it never should). The rest is shared: run.go (wiring and
// shutdown order), tether.go (tether in its own goroutine), prices.go (the
// numbered events both feeds publish), faults.go (the seeded plan and the
// scheduler), ledger.go and tracker.go (the app's accounting),
// narrator.go, story.go and summary.go (the output), httpserver.go.
//
// The feeds are the demo's own small servers, not the test servers of
// upstream/upstreamtest or internal/sse/ssetest: no test scaffolding is
// linked into the binary.
//
// Concurrency contract: Run owns every goroutine it starts (the feed's
// servers, connections and publisher, tether, the app's reader, the fault
// scheduler) and returns only after all of them have ended. The narrator is
// safe for concurrent use and serialises output lines. The ledger guards
// its state with its mutex and never narrates under it. Each feed queues or
// takes events under its mutex, so a replay and the live events after it
// cannot interleave, and never waits on the network or narrates under it.
package demo
