// Package binarytest runs the tether binary as a process of its own, for
// the tests that measure it from outside: its memory, descriptors and
// goroutines are then tether's alone, not shared with the test's peers and
// ledgers as they are when tether runs in the test process.
//
// [Build] compiles cmd/tether without -race (the race detector multiplies
// memory and CPU, and a figure measured under it is not tether's); [Start]
// runs it with a TETHER_* environment, its admin server on 127.0.0.1:0,
// reads the listeners it opened from its JSON log, and stops it by its pid
// at the end of the test (SIGTERM, then SIGKILL). A [Process] is read from
// outside: [Process.Metrics] scrapes its admin /metrics, [Process.OpenFDs]
// counts /proc/PID/fd and [Process.RSS] reads VmRSS from /proc/PID/status
// (both Linux only: elsewhere they return an error saying so).
//
// Concurrency: a Process's methods are safe for concurrent use. The
// goroutines it starts (the one reading the log, the one waiting for the
// process) are owned by it and have ended when Stop returns.
package binarytest
