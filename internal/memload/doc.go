// Package memload holds no code, only tests: tether's memory budget
// (TETHER_MEMORY_LIMIT, docs/design.md "Memory") checked on the binary, built
// from ./cmd/tether and run as a user runs it, under the load that made the
// budget necessary: WebSocket apps that stop reading while their upstreams
// keep sending as fast as they can.
//
// Each test starts an upstream WebSocket server of its own on 127.0.0.1:0
// that floods every connection with numbered messages, tether in front of
// it, and apps of three kinds: paused (they read nothing until the test lets
// them), slow (they read at a paced rate) and fast. It samples the resident
// set of the tether process (VmRSS in /proc/PID/status) while the floods
// run, then stops the floods, lets every app read to the end and checks
// that each got its whole stream in order: a full budget paused sessions,
// it lost nothing. tether's /metrics must show no upstream connection lost,
// no message dropped, and the budget used within its limit.
//
// Linux only: the resident set is read from /proc. Each test is bounded to
// a few seconds of flooding and stops by itself.
package memload
