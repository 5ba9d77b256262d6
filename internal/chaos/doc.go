// Package chaos holds no code, only the chaos soak of docs/design.md's worked
// example: tether, run as a process of its own (the binary, built by the
// test, under -race when the test runs under -race), between a naive app and
// a sequenced upstream that speaks the resume protocol, with a fault proxy
// in between injecting random latency spikes, half-open blackholes, TCP
// resets, sliced writes, server closes 1001 and 1012 and handshake 503s for
// a bounded time (TETHER_SOAK_DURATION, default 45s; skipped with -short).
//
// The ledger checked at the end: the app saw every sequenced event exactly
// once and in order, its socket never closed, every message it sent reached
// the server and was acknowledged to it exactly once, tether drained and
// exited 0 on SIGTERM (a race found by the detector exits 66), and no
// goroutine of the test outlived it (goleak in TestMain). Because the fault
// proxy delivers blackholed bytes intact once traffic resumes, the ledger
// alone cannot see a missed half-open connection: every blackhole of a
// confirmed upstream must also make the heartbeat declare the connection
// lost (read from tether's admin /status and
// tether_upstream_disconnects_total).
//
// tether's own memory is sampled apart from the test's ledger, which grows
// with the run: go_gc_heap_live_bytes from its admin /metrics every
// heapEvery. The soak fails if the floor of that live heap rises over the
// run's second half faster than leakPerMessage bytes for every message
// tether relayed (heap_test.go).
//
// A longer run, for the figures of a release (the live heap's floors and
// slope are logged):
//
//	TETHER_SOAK_DURATION=10m go test -run TestChaosSoak -v -timeout 20m ./internal/chaos
//
// without -race measures the binary as it ships; with -race it is the
// race-built binary's heap. TETHER_SOAK_SEED=N replays a fault schedule.
//
// # Concurrency contract
//
// Everything here is test code. Every goroutine a test starts (the feed's
// publisher, the fault injector, the heap sampler, the app's reader and
// sender) is stopped and waited for before the test returns; tether itself
// is stopped by its pid.
package chaos
