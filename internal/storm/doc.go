// Package storm simulates a reconnect storm at scale: tens of thousands of
// sidecars lose their upstream at the same instant and reconnect, with the
// real backoff code, against a server that completes a fixed number of
// handshakes per second. It answers the question the small storm tests of
// package upstream cannot: what arrival rate does the server see, how long
// until everyone is back, and how many attempts does that cost, for each
// jitter strategy and for tether's defaults.
//
// # What is real and what is modelled
//
// Delays come from upstream.Backoff.DelayWithFloor, called with the same
// arguments upstream.Client.wait passes (failures counted from zero since
// the last confirmation, the previous delay, the floor of the failure); the
// floors come from upstream.ClosePolicy.Classify for the close code that
// started the storm and from upstream.ParseRetryAfter for the server's 503;
// upstream.ClassifyStatus confirms that 503 is retried. A test drives a real
// upstream.Client through the same failures over loopback sockets and
// checks that it chooses exactly the simulated delays.
//
// Modelled: time is virtual (an event queue of wake-ups, no sleeping); a
// loss is noticed at once (a TCP reset or FIN, as when the server process
// dies; a silent path would add the heartbeat's detection spread, which only
// helps); dials and rejections take no time; the server refuses connections
// (closed port) until the scenario's outage ends, then completes at most
// Config.Capacity handshakes in each one-second tick and answers the rest of
// that tick with 503 (plus Retry-After when configured); a connected client
// stays connected.
//
// # Measures
//
// Per strategy and scenario, Result holds the peak number of handshakes
// reaching the listening server in one one-second bucket (the unit of the
// "reconnects per second" figures the issue compares against), when half and
// when all of the clients were connected, the total number of dials, and the
// per-second histogram that cmd/stormplot draws. Table renders results as
// Markdown.
//
// # Concurrency contract
//
// The package starts no goroutines. Run and RunAll are pure functions of
// their arguments, deterministic for a given Config.Seed, and safe to call
// concurrently; each run owns its random source.
package storm
