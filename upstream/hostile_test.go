package upstream_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// Hostile upstreams: servers no real one is, scripted on real loopback
// sockets. Each case checks the log line naming the problem, the metric
// (the Observer's label), a cost bounded by the configuration, and whether
// the Client keeps going (the app's socket kept) or stops with the error
// the app is closed with.

// hostileDialTimeout is the dial timeout of the case whose subject it is:
// an answer trickled too slowly.
const hostileDialTimeout = 300 * time.Millisecond

// hostile is a TCP server on 127.0.0.1 that reads each connection's
// handshake request and hands the connection to script, which writes what
// it likes; the connection is closed when script returns. n counts
// connections from 1.
func hostile(t *testing.T, script func(ctx context.Context, nc net.Conn, key string, n int)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
				defer stop()
				_ = nc.SetReadDeadline(time.Now().Add(waitLimit))
				req, err := http.ReadRequest(bufio.NewReader(nc))
				if err != nil {
					return
				}
				_ = nc.SetReadDeadline(time.Time{})
				script(ctx, nc, req.Header.Get("Sec-WebSocket-Key"), n)
			}()
		}
	}()
	t.Cleanup(func() { cancel(); _ = ln.Close(); wg.Wait() })
	return "ws://" + ln.Addr().String() + "/"
}

// accept is the valid 101 answer to a handshake with key (RFC 6455 §4.2.2).
func accept(key string) string {
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: " + base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n"
}

// frame is one server frame, as unmasked as a server's must be unless
// the test says otherwise.
func frame(h ws.Header, payload []byte) []byte {
	var b strings.Builder
	_ = ws.WriteHeader(&b, h)
	if h.Masked {
		payload = append([]byte(nil), payload...)
		ws.Cipher(payload, h.Mask, 0)
	}
	b.Write(payload)
	return []byte(b.String())
}

// holdUntil keeps a scripted connection open, sending nothing, until the
// client closes it or the test ends.
func holdUntil(ctx context.Context, nc net.Conn) {
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, nc); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	_ = nc.Close()
	<-done
}

// hostileOptions is a Client configuration for url with the heartbeat on,
// its logs recorded and its Observer calls reported. Its dials may take up
// to waitLimit: a handshake that must succeed took 340 to 380 ms under
// -race on a loaded machine, and a case about the dial timeout sets its own.
func hostileOptions(t *testing.T, url string, h *handler) (upstream.Options, *observer.ObservedLogs, *recorder) {
	t.Helper()
	opts := heartbeatOptions(t, url, h)
	opts.DialTimeout = waitLimit
	logs := observe(t, &opts)
	rec := newRecorder()
	opts.Observer = rec
	return opts, logs, rec
}

// expectScheduled waits for the reconnect scheduled after a failure whose
// logged reason contains problem, and returns when it was logged.
func expectScheduled(t *testing.T, logs *observer.ObservedLogs, problem string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, e := range logs.FilterMessage(scheduled).All() {
			if reason, _ := e.ContextMap()["reason"].(string); strings.Contains(reason, problem) {
				return
			}
		}
		waitTick(t)
	}
	t.Fatalf("no %q log line with a reason naming %q within %v", scheduled, problem, waitLimit)
}

// waitTick spaces the looks at a log recorder, which has no event to wait on.
func waitTick(t *testing.T) {
	t.Helper()
	tm := time.NewTimer(5 * time.Millisecond)
	defer tm.Stop()
	<-tm.C
}

// expectKeptGoing fails unless the Client is still dialling after the
// failure, as it does for the app's socket kept open.
func expectKeptGoing(t *testing.T, c *upstream.Client, rec *recorder, label string) {
	t.Helper()
	rec.expect(t, label) // a second attempt, failing the same way
	if isClosed(c.Done()) {
		t.Fatalf("Client stopped (%v), want it to keep retrying", c.Err())
	}
}

// TestHostileHandshake: answers that are no WebSocket handshake fail the
// dial, each within TETHER_DIAL_TIMEOUT or at once, named in the log and
// counted, and are retried with backoff: a proxy or a deployment may heal.
func TestHostileHandshake(t *testing.T) {
	tests := []struct {
		name    string
		script  func(ctx context.Context, nc net.Conn, key string)
		problem string // in the logged reason
		label   string // the Observer's dial result
		within  time.Duration
	}{
		{"trickled one byte a second", func(ctx context.Context, nc net.Conn, key string) {
			answer := accept(key)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for i := range len(answer) {
				if _, err := nc.Write([]byte{answer[i]}); err != nil {
					return
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
			}
		}, "not done within TETHER_DIAL_TIMEOUT (300ms)", "dialed timeout", hostileDialTimeout},
		{"headers without end", func(ctx context.Context, nc net.Conn, key string) {
			if _, err := io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\n"); err != nil {
				return
			}
			for i := 0; ctx.Err() == nil; i++ {
				if _, err := fmt.Fprintf(nc, "X-Filler-%d: %s\r\n", i, strings.Repeat("a", 100)); err != nil {
					return
				}
			}
		}, "answer exceeds 64 KiB without ending its headers", "dialed handshake", 0},
		{"one header line without end", func(ctx context.Context, nc net.Conn, key string) {
			if _, err := io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nX-Long: "); err != nil {
				return
			}
			chunk := []byte(strings.Repeat("a", 4096))
			for ctx.Err() == nil {
				if _, err := nc.Write(chunk); err != nil {
					return
				}
			}
		}, "answer exceeds 64 KiB without ending its headers", "dialed handshake", 0},
		{"101 without a valid Sec-WebSocket-Accept", func(ctx context.Context, nc net.Conn, key string) {
			_, _ = io.WriteString(nc, strings.Replace(accept(key), "Accept: ", "Accept: x", 1))
			holdUntil(ctx, nc)
		}, "101 without a valid Sec-WebSocket-Accept", "dialed handshake", 0},
		{"101 without Upgrade", func(ctx context.Context, nc net.Conn, key string) {
			_, _ = io.WriteString(nc, strings.Replace(accept(key), "Upgrade: websocket\r\n", "", 1))
			holdUntil(ctx, nc)
		}, `101 without "Upgrade: websocket"`, "dialed handshake", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := hostile(t, func(ctx context.Context, nc net.Conn, key string, _ int) { tt.script(ctx, nc, key) })
			opts, logs, rec := hostileOptions(t, url, newHandler())
			// The other cases keep waitLimit: failing well before it shows
			// that the answer, not the timeout, was the cause.
			if tt.within != 0 {
				opts.DialTimeout = tt.within
			}
			start := time.Now()
			c := startClient(t, opts)
			rec.expect(t, tt.label)
			took := time.Since(start)
			if bound := opts.DialTimeout + slack; took > bound || tt.within == 0 && took >= opts.DialTimeout {
				t.Errorf("the dial failed after %v, want within %v (at once unless the timeout is the cause)", took, bound)
			}
			expectScheduled(t, logs, tt.problem)
			expectKeptGoing(t, c, rec, tt.label)
		})
	}
}

// TestHostileFrames: a valid handshake, then frames that break RFC 6455.
// Each ends the connection at once (or, for a length that lies, within
// the heartbeat's bound), is named in the log and counted as a protocol
// loss (heartbeat for the lie), and the Client reconnects: the app keeps
// its socket. Memory is bounded by TETHER_MAX_MESSAGE_BYTES: a payload is
// allocated as its bytes arrive.
func TestHostileFrames(t *testing.T) {
	text := func(p string) ws.Header { return ws.Header{Fin: true, OpCode: ws.OpText, Length: int64(len(p))} }
	tests := []struct {
		name    string
		wire    func() []byte
		problem string
		label   string
	}{
		{"reserved bits", func() []byte {
			h := text("x")
			h.Rsv = 4
			return frame(h, []byte("x"))
		}, "reserved bits set without a negotiated extension", "lost protocol 0"},
		{"reserved opcode", func() []byte {
			return frame(ws.Header{Fin: true, OpCode: 0x3, Length: 1}, []byte("x"))
		}, "reserved opcode", "lost protocol 0"},
		{"masked frame from the server", func() []byte {
			h := text("x")
			h.Masked, h.Mask = true, [4]byte{1, 2, 3, 4}
			return frame(h, []byte("x"))
		}, "masked frame from server", "lost protocol 0"},
		{"length with the top bit set", func() []byte {
			b := []byte{0x82, 127}
			return binary.BigEndian.AppendUint64(b, 1<<63|10)
		}, "payload length with the most significant bit set", "lost protocol 0"},
		{"length that lies", func() []byte {
			// Declares 1 MiB, sends ten bytes, then nothing.
			wire := frame(ws.Header{Fin: true, OpCode: ws.OpBinary, Length: 1 << 20}, nil)
			return append(wire, make([]byte, 10)...)
		}, "heartbeat timeout", "lost heartbeat 0"},
		{"invalid UTF-8 in text", func() []byte {
			return frame(text("bad \xff"), []byte("bad \xff"))
		}, "invalid UTF-8 in text message", "lost protocol 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := hostile(t, func(ctx context.Context, nc net.Conn, key string, _ int) {
				if _, err := io.WriteString(nc, accept(key)); err != nil {
					return
				}
				if _, err := nc.Write(tt.wire()); err != nil {
					return
				}
				holdUntil(ctx, nc)
			})
			opts, logs, rec := hostileOptions(t, url, newHandler())
			start := time.Now()
			c := startClient(t, opts)
			rec.expect(t, "dialed ok", tt.label)
			if took, bound := time.Since(start), pingInterval+pingTimeout+slack; took > bound {
				t.Errorf("connection ended after %v, want within %v", took, bound)
			}
			expectScheduled(t, logs, tt.problem)
			rec.expect(t, "dialed ok") // reconnected
			if isClosed(c.Done()) {
				t.Fatalf("Client stopped (%v), want it to reconnect", c.Err())
			}
		})
	}
}

// TestEndlessFragmentedMessage: a message whose fragments never end, with
// data or empty, costs at most TETHER_MAX_MESSAGE_BYTES: it is refused
// with 1009 as an oversized message is, which is permanent by default, the
// app closed with 1009.
func TestEndlessFragmentedMessage(t *testing.T) {
	const limit = 64 << 10
	for _, size := range []int{1024, 0} {
		t.Run(fmt.Sprintf("fragments of %d bytes", size), func(t *testing.T) {
			url := hostile(t, func(ctx context.Context, nc net.Conn, key string, _ int) {
				if _, err := io.WriteString(nc, accept(key)); err != nil {
					return
				}
				payload := make([]byte, size)
				wire := frame(ws.Header{OpCode: ws.OpBinary, Length: int64(size)}, payload)
				cont := frame(ws.Header{OpCode: ws.OpContinuation, Length: int64(size)}, payload)
				burst := []byte(strings.Repeat(string(cont), 256))
				for ctx.Err() == nil {
					if _, err := nc.Write(wire); err != nil {
						return
					}
					wire = burst
				}
			})
			opts, logs, rec := hostileOptions(t, url, newHandler())
			opts.MaxMessageBytes = limit
			// The script streams without reading, so it never answers a
			// probe: with the heartbeat on, the connection lives only while
			// its bytes keep coming, and under -race on a loaded machine the
			// script's goroutine went 200 ms without a write (the heartbeat
			// then rightly found the connection dead before the limit was
			// reached). The limit alone must end it.
			opts.PingInterval = 0
			c := startClient(t, opts)
			rec.expect(t, "dialed ok", "lost close 1009")
			waitClosed(t, c.Done(), "Client stop")
			var ce *upstream.CloseError
			if err := c.Err(); !errors.As(err, &ce) || ce.Code != 1009 {
				t.Fatalf("Err() = %v, want close 1009", err)
			}
			if logs.FilterMessage("upstream failed permanently").Len() != 1 {
				t.Errorf("no \"upstream failed permanently\" log line")
			}
		})
	}
}

// TestPingFlood: an upstream that sends pings faster than tether answers
// them still gets its data through, keeps its connection, and the pings
// left unanswered are logged when it ends.
func TestPingFlood(t *testing.T) {
	const messages = 50
	srv := newServer(t, upstreamtest.Options{OnConn: holdOpen})
	h := newHandler()
	opts, logs, _ := hostileOptions(t, srv.URL(), h)
	// The flood keeps the connection alive only while the flooding
	// goroutine runs, and it runs in this process: under -race on a loaded
	// machine single Pings took 100 to 900 ms (the goroutine waiting to be
	// scheduled while the heartbeat's timer fired on time), and the
	// heartbeat found 200 ms of real silence. Its timeout is the slack
	// given to scheduling, so only a flood that stops is silence.
	opts.PingTimeout = slack
	c := startClient(t, opts)
	sc := recv(t, srv.Conns(), "server conn")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if sc.Ping(nil) != nil {
				return
			}
			if i%200 == 0 && i/200 < messages {
				_ = sc.Send(fmt.Sprintf("data %d", i/200))
			}
		}
	}()
	for i := range messages {
		if m := h.nextMessage(t); m.data != fmt.Sprintf("data %d", i) || m.gen != 1 {
			t.Fatalf("Message(gen %d, %q), want (gen 1, \"data %d\")", m.gen, m.data, i)
		}
	}
	close(stop)
	wg.Wait()
	if lost, ok := pending(h.losts); ok {
		t.Fatalf("Lost(gen %d, %v) under the ping flood", lost.gen, lost.err)
	}
	c.Close()
	if logs.FilterMessage("upstream sent pings faster than tether answered them; only the latest were answered").Len() != 1 {
		t.Errorf("no log line for the unanswered pings (pings sent %d, pongs received by the server %d)", sc.Pings(), sc.Pongs())
	}
}

// TestSSEEndlessLine: an event stream whose line never ends costs at most
// TETHER_MAX_MESSAGE_BYTES: it is refused as an oversized event, close
// 1009, permanent by default (the app closed with 1009).
func TestSSEEndlessLine(t *testing.T) {
	const limit = 64 << 10
	url := hostile(t, func(ctx context.Context, nc net.Conn, _ string, _ int) {
		if _, err := io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: "); err != nil {
			return
		}
		chunk := []byte(strings.Repeat("x", 4096))
		for ctx.Err() == nil {
			if _, err := nc.Write(chunk); err != nil {
				return
			}
		}
	})
	opts, logs, rec := hostileOptions(t, "http"+strings.TrimPrefix(url, "ws"), newHandler())
	opts.Kind = upstream.KindSSE
	opts.MaxMessageBytes = limit
	opts.PingInterval = 0 // the script never answers a probe: as in TestEndlessFragmentedMessage
	c := startClient(t, opts)
	rec.expect(t, "dialed ok", "lost close 1009")
	waitClosed(t, c.Done(), "Client stop")
	var ce *upstream.CloseError
	if err := c.Err(); !errors.As(err, &ce) || ce.Code != 1009 || !strings.Contains(ce.Reason, "TETHER_MAX_MESSAGE_BYTES") {
		t.Fatalf("Err() = %v, want close 1009 naming TETHER_MAX_MESSAGE_BYTES", err)
	}
	if logs.FilterMessage("upstream failed permanently").Len() != 1 {
		t.Errorf("no \"upstream failed permanently\" log line")
	}
}

// dnsServer answers A queries for every name with the address addr holds,
// and AAAA queries with none, over UDP on 127.0.0.1: the resolver a test
// controls, so a name can move between two dials.
func dnsServer(t *testing.T, addr *atomic.Pointer[net.IP]) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if answer := dnsAnswer(buf[:n], *addr.Load()); answer != nil {
				_, _ = pc.WriteTo(answer, from)
			}
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); <-done })
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// dnsAnswer answers one query (RFC 1035 §4.1): its header and question,
// then for type A one record with ip, for any other type none.
func dnsAnswer(q []byte, ip net.IP) []byte {
	if len(q) < 12 {
		return nil
	}
	end := 12
	for end < len(q) && q[end] != 0 {
		end += int(q[end]) + 1
	}
	end += 5 // the root label, QTYPE, QCLASS
	if end > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[end-4:])
	out := append([]byte(nil), q[:2]...)                  // ID
	out = append(out, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0) // response, recursion; one question
	out = append(out, q[12:end]...)
	if qtype == 1 {
		out[7] = 1                                                // one answer
		out = append(out, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4) // name at 12, A, IN, TTL 0
		out = append(out, ip.To4()...)
	}
	return out
}

// twoAddresses starts two test servers on one port, at 127.0.0.2 and
// 127.0.0.3.
func twoAddresses(t *testing.T, opts upstreamtest.Options) (*upstreamtest.Server, *upstreamtest.Server) {
	t.Helper()
	for range 10 {
		opts.Addr = "127.0.0.2:0"
		a := newServer(t, opts)
		_, port, _ := net.SplitHostPort(a.Addr())
		opts.Addr = "127.0.0.3:" + port
		b, err := upstreamtest.NewServer(opts)
		if err != nil {
			continue // the port is taken at 127.0.0.3: try another
		}
		t.Cleanup(func() { _ = b.Close() })
		return a, b
	}
	t.Fatal("no port free at both 127.0.0.2 and 127.0.0.3")
	return nil, nil
}

// TestNameResolvedOnEveryDial: the upstream's name is resolved anew on
// every dial, so when it moves (a failover, a redeploy behind DNS) the
// reconnect reaches the new address; "upstream connected" logs the address
// each connection went to.
func TestNameResolvedOnEveryDial(t *testing.T) {
	var current atomic.Pointer[net.IP]
	first, second := net.IPv4(127, 0, 0, 2), net.IPv4(127, 0, 0, 3)
	current.Store(&first)
	resolver := dnsServer(t, &current)
	a, b := twoAddresses(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		if c.N() == 1 {
			current.Store(&second) // the name moves, then the old server goes
			_ = c.CloseWith(int(ws.StatusGoingAway), "moving")
			return
		}
		holdOpen(c)
	}})
	_, port, _ := net.SplitHostPort(a.Addr())
	h := newHandler()
	opts, logs, rec := hostileOptions(t, "ws://upstream.tether.test:"+port+"/", h)
	opts.Resolver = resolver
	startClient(t, opts)
	rec.expect(t, "dialed ok", "lost close 1001", "dialed ok")
	recv(t, a.Conns(), "connection to the first address")
	recv(t, b.Conns(), "connection to the second address, after the name moved")
	// The server sees the handshake before the client has logged it.
	eventually(t, "two connections logged", func() bool { return logs.FilterMessage("upstream connected").Len() == 2 })
	var remotes []string
	for _, e := range logs.FilterMessage("upstream connected").All() {
		remotes = append(remotes, fmt.Sprint(e.ContextMap()["remote"]))
	}
	if want := []string{a.Addr(), b.Addr()}; strings.Join(remotes, " ") != strings.Join(want, " ") {
		t.Errorf("upstream connected to %q, want %q", remotes, want)
	}
}
