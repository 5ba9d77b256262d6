// Package churn holds no code, only the churn test of issue 19: ten thousand
// app sessions opened and closed against tether (WebSocket, tcp:// lines and
// sse:// EventSource requests; clean closes, TCP resets, and apps that
// vanish in the middle of their handshake or before their first upstream
// dial is over) while a fault loop resets the upstream connections and
// restarts the upstream server. When the apps are gone, tether's
// goroutines, open file descriptors and memory must come back to what they
// were before the churn.
//
// TestChurnBinary runs the real binary, built without -race, as a process of
// its own, so that its figures are its own: open descriptors from
// /proc/PID/fd, resident memory from RssAnon in /proc/PID/status (VmRSS is
// logged), goroutines and the heap from the Go runtime collector on its
// admin /metrics; the heap's free room (idle spans, and the part of in-use
// spans the live heap does not fill), sized by its peak, is not counted as
// memory kept. The
// baseline is taken after a warm-up churn at the same concurrency, so the
// runtime's pools and free lists already have the size the churn gives them;
// a leak is then what grows with the number of sessions churned, not with
// how many are open at once.
//
// TestChurnInProcess runs a shorter churn (2,000 sessions: under -race each
// costs several times more) against proxy.Server in the test process, so
// that the process's goroutines and descriptors are compared exactly and
// goleak (TestMain) names the stack of any goroutine left behind.
//
// # Concurrency contract
//
// Everything here is test code. Every goroutine a test starts (the apps, the
// fault loop, the upstream servers, the reader of tether's log) is stopped
// and waited for before the test returns.
package churn
