// Package chaos holds no code, only the chaos soak of DESIGN.md's worked
// example: tether, run in-process, between a naive app and a sequenced
// upstream that speaks the resume protocol, with a fault proxy in between
// injecting random latency spikes, half-open blackholes, TCP resets, sliced
// writes, server closes 1001 and 1012 and handshake 503s for a bounded time
// (TETHER_SOAK_DURATION, default 45s; skipped with -short).
//
// The ledger checked at the end: the app saw every sequenced event exactly
// once and in order, its socket never closed, every message it sent reached
// the server and was acknowledged to it exactly once, and no goroutine
// outlived the test (goleak in TestMain). Because the fault proxy delivers
// blackholed bytes intact once traffic resumes, the ledger alone cannot see
// a missed half-open connection: every blackhole of a confirmed upstream
// must also make the heartbeat declare the connection lost.
//
// # Concurrency contract
//
// Everything here is test code. Every goroutine a test starts (the feed's
// publisher, the fault injector, the app's reader and sender) is stopped
// and waited for before the test returns.
package chaos
