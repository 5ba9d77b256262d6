// Package upstreamtest provides the misbehaving peers that tether's tests (and
// `tether demo`) run against: a scriptable WebSocket upstream, [Server], and a
// TCP fault injector, [FaultProxy], that sits between tether and that server.
//
// The package is written directly on gobwas/ws and net, and imports no other
// tether package, so a bug in tether's own framing, dialing or reconnect code
// cannot hide itself by being shared with the peer that tests it.
//
// # Server
//
// [NewServer] listens on 127.0.0.1:0. Every TCP connection is handshaken in
// its own goroutine; [Options.Handshake] may refuse it with any HTTP status and
// headers (401, 503 with Retry-After, ...). Each accepted WebSocket connection
// becomes a [Conn]: a reader goroutine unmasks and reassembles client frames,
// answers pings (unless told not to), records pongs and the client's close
// frame, and queues data messages for [Conn.Read]. [Options.OnConn] scripts
// the server side of the connection (push sequence numbers, skip or repeat
// them, close with 1012, reset the TCP connection, go half-open with
// [Conn.Stall]); the default echoes every message. [Options.Greeting] is
// written in the same Write call as the 101 response, reproducing the
// "frames buffered with the handshake" case a client must not lose.
// [Options.TLS] (with [SelfSignedTLS] for a throwaway CA) serves wss.
//
// # FaultProxy
//
// [NewFaultProxy] forwards TCP bytes to a target address and can, at any time,
// add latency, blackhole traffic (bytes are held, not dropped, so the stream
// stays intact when traffic resumes), reset every live connection, refuse new
// ones, or slice writes into tiny pieces so frames straddle TCP segments.
//
// # Concurrency contract
//
// Every exported method of [Server], [Conn] and [FaultProxy] is safe for
// concurrent use. Conn writes are serialised by one mutex: this is a test peer,
// not a model for production code. Every goroutine the package starts is owned
// by the Server or FaultProxy that started it, and their Close methods return
// only after all of them have exited, so goleak-checked tests stay clean.
// OnConn and Handshake callbacks run on those goroutines: OnConn must return
// once its Conn is done (Read fails, or [Conn.Done] / [Conn.Context] fire),
// otherwise [Server.Close] waits for it.
package upstreamtest
