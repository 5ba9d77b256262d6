// Command tether-bench measures what tether costs a live feed, side by side with
// a direct connection and with nginx, on loopback.
//
// It starts a sequenced feed server (a WebSocket server streaming numbered JSON
// messages that carry their send time) and a sink client (which checks that
// every number arrives once, in order, and measures the delay from the embedded
// send time to receipt), both in this process. Between them it places, in turn:
// nothing (direct), the real tether binary (built with go build, run as a
// subprocess with the TETHER_* variables of this process passed through), and
// nginx when it is installed (configured by the tool in a temporary directory,
// once with the standard WebSocket proxy settings and once with enlarged
// buffers). For each message size it measures the maximum throughput and the
// latency at a fixed rate, alternating targets within every round, and reports
// medians over rounds. It also measures tether's resident memory per idle
// session and the CPU time the proxy process spends per 100,000 messages a
// second (from /proc).
//
// Process layout: the feed and the sink share this process, and every proxy runs
// as a process of its own, as in production. That way the proxy's CPU time and
// memory are read from /proc for it alone, and every path pays the same load
// generator. On a small machine (2 cores) the feed and the sink compete with the
// proxy for CPU: a proxied path has three busy parties where the direct path has
// two, so ratios to direct understate what the proxy would reach with cores of
// its own; the comparison between proxies (tether, nginx) is like for like.
//
// -tether-baseline adds a second tether binary as path tether-base, measured in
// the same rounds, for before/after comparisons of a change.
//
// Everything listens on 127.0.0.1 and stops by itself: each run lasts -duration,
// and the subprocesses are stopped at the end, or on Ctrl-C.
//
// Concurrency: the feed serves each connection on its own goroutines (a writer
// and a reader that answers pings); the sink reads on one goroutine while a
// controller goroutine marks the measurement window and ends the run. Runs are
// sequential: a run starts only once the feed has no connection left from the
// previous one, so runs never overlap on the machine's CPUs.
package main
