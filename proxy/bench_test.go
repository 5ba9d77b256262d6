package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/rules"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// The forwarding benchmarks put an in-process proxy.Server between a raw
// upstream and a raw app on loopback. Both raw ends are written with gobwas'
// framing and reused buffers only, so allocs/op counts tether's allocations
// per message (b.ReportAllocs counts the whole process).

var benchSizes = []int{64, 1 << 10, 16 << 10}

// Rule sets of the benchmarks: none, sequencing only (the messages carry
// "seq"), and all of a typical configuration, so every message is looked at:
// app messages are classified (login, subscribe, unsubscribe), upstream
// messages are sequenced and scanned for a welcome and a reply id.
const (
	rulesNone = "none"
	rulesSeq  = "seq"
	rulesAll  = "all"
)

func benchRules(b testing.TB, set string) protocol.Rules {
	m := func(p string) *rules.Matcher {
		mm, err := rules.Compile(p)
		if err != nil {
			b.Fatalf("Compile(%q): %v", p, err)
		}
		return mm
	}
	p := func(s string) rules.Path {
		pp, err := rules.ParsePath(s)
		if err != nil {
			b.Fatalf("ParsePath(%q): %v", s, err)
		}
		return pp
	}
	switch set {
	case rulesNone:
		return protocol.Rules{}
	case rulesSeq:
		return protocol.Rules{SeqPath: p("seq")}
	}
	return protocol.Rules{
		SeqPath:              p("seq"),
		AuthMatch:            m(`{"op":"login"}`),
		SubscribeMatch:       m(`{"op":"subscribe"}`),
		UnsubscribeMatch:     m(`{"op":"unsubscribe"}`),
		SubscriptionKey:      p("channel"),
		ReplyIDPath:          p("id"),
		HideOnReconnectMatch: m(`{"t":"welcome"}`),
	}
}

// benchOptions are tether's defaults (the TETHER_* variables unset), with
// the rule set named.
func benchOptions(b testing.TB, upstreamURL, rules string) proxy.Options {
	codes := func(s string) upstream.CodeSet {
		cs, err := upstream.ParseCodeSet(s)
		if err != nil {
			b.Fatalf("ParseCodeSet: %v", err)
		}
		return cs
	}
	o := proxy.Options{
		Upstream: upstream.Options{
			URL:         upstreamURL,
			DialTimeout: 10 * time.Second,
			Backoff:     upstream.Backoff{Jitter: upstream.JitterFull, Base: 500 * time.Millisecond, Cap: 30 * time.Second},
			StableAfter: 10 * time.Second,
			Close: upstream.ClosePolicy{
				Permanent: codes(upstream.DefaultPermanentCodes), Reauth: codes(upstream.DefaultReauthCodes),
				RestartFloor: 5 * time.Second, TryAgainFloor: 15 * time.Second,
			},
			AuthFailuresMax: 3,
			PingInterval:    15 * time.Second,
			PingTimeout:     10 * time.Second,
			MaxMessageBytes: 16 << 20,
		},
		AcceptWait:            2 * time.Second,
		OutboxMaxMessages:     10000,
		OutboxMaxBytes:        8 << 20,
		OutboxOverflow:        buffer.OverflowClose,
		MaxSessions:           1024,
		MaxMessageBytes:       16 << 20,
		DownstreamBufferBytes: 16 << 20,
		Logger:                zap.NewNop(),
		Rules:                 benchRules(b, rules),
	}
	// The memory budget as tether runs by default without a cgroup limit
	// (TETHER_MEMORY_LIMIT 256MiB, TETHER_MEMORY_SHARE_BYTES 32KiB): every
	// message towards the app is counted on it.
	bud, err := budget.New(budget.Options{Limit: 256 << 20, Share: 32 << 10, Sessions: 1024})
	if err != nil {
		b.Fatal(err)
	}
	o.Budget = bud
	return o
}

// benchPath is one session: the raw app and the raw upstream connection
// tether opened for it.
type benchPath struct {
	srv      *proxy.Server
	app      net.Conn
	appR     *bufio.Reader
	upstream net.Conn
	upR      *bufio.Reader
}

// newBenchPath starts a proxy.Server and one session through it. Cleanup cuts
// both raw ends and shuts the server down.
func newBenchPath(b testing.TB, rules string) *benchPath {
	b.Helper()
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("listen: %v", err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := upLn.Accept()
		if err == nil {
			if _, err = (ws.Upgrader{}).Upgrade(nc); err != nil {
				_ = nc.Close()
				nc = nil
			}
		}
		accepted <- nc
	}()
	srv, err := proxy.New(benchOptions(b, "ws://"+upLn.Addr().String()+"/", rules))
	if err != nil {
		b.Fatalf("proxy.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("listen: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	app, br, _, dialErr := ws.Dialer{}.Dial(ctx, "ws://"+ln.Addr().String()+"/")
	_ = upLn.Close() // one session: unblocks Accept if the dial never came
	up := <-accepted
	p := &benchPath{srv: srv, app: app, upstream: up}
	b.Cleanup(func() {
		for _, c := range []net.Conn{app, up} {
			if c != nil {
				_ = c.Close()
			}
		}
		sctx, scancel := context.WithTimeout(context.Background(), testTimeout)
		defer scancel()
		if err := srv.Shutdown(sctx, 0); err != nil {
			b.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			b.Errorf("Serve: %v", err)
		}
	})
	if dialErr != nil || up == nil {
		b.Fatalf("session: app dial %v, upstream accepted %v", dialErr, up != nil)
	}
	var appSrc io.Reader = app
	if br != nil {
		appSrc = io.MultiReader(br, app)
	}
	p.appR = bufio.NewReaderSize(appSrc, 64<<10)
	p.upR = bufio.NewReaderSize(up, 64<<10)
	return p
}

// benchMessage is a JSON event of size bytes whose sequence number sits at
// seqAt, 16 digits wide, so a writer can number messages in place.
func benchMessage(size int) (msg []byte, seqAt int) {
	const head = `{"t":"event","seq":`
	msg = append([]byte(head), "1000000000000000"...)
	msg = append(msg, `,"p":"`...)
	for len(msg) < size-2 {
		msg = append(msg, 'x')
	}
	return append(msg, `"}`...), len(head)
}

// frameBatch is count frames of one message, pre-encoded, with the positions
// of their sequence digits. Client frames are masked with a fixed key and
// re-masked when numbered (RFC 6455 §5.3: a benchmark needs no secrecy).
type frameBatch struct {
	buf      []byte
	frameLen int
	hdrLen   int
	seqAt    int
	msg      []byte
	masked   bool
	key      [4]byte
}

func newFrameBatch(size, count int, masked bool) *frameBatch {
	msg, seqAt := benchMessage(size)
	fb := &frameBatch{msg: msg, seqAt: seqAt, masked: masked, key: [4]byte{0x37, 0xfa, 0x21, 0x3d}}
	h := ws.Header{Fin: true, OpCode: ws.OpText, Length: int64(size), Masked: masked, Mask: fb.key}
	var hb bytes.Buffer
	if err := ws.WriteHeader(&hb, h); err != nil {
		panic(err) // a valid header cannot fail to encode into a buffer
	}
	fb.hdrLen = hb.Len()
	fb.frameLen = fb.hdrLen + size
	for range count {
		fb.buf = append(fb.buf, hb.Bytes()...)
		fb.buf = append(fb.buf, msg...)
	}
	return fb
}

// number writes sequence numbers first, first+1, … into the first n frames.
func (fb *frameBatch) number(first uint64, n int) {
	for i := range n {
		p := fb.buf[i*fb.frameLen+fb.hdrLen : (i+1)*fb.frameLen]
		copy(p, fb.msg)
		putSeq(p[fb.seqAt:fb.seqAt+16], seqBase+first+uint64(i))
		if fb.masked {
			ws.Cipher(p, fb.key, 0)
		}
	}
}

// seqBase keeps sequence numbers 16 digits wide, so they are written in place.
const seqBase = 1_000_000_000_000_000

func putSeq(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}

// writeNumbered writes n numbered messages, batch by batch.
func writeNumbered(w io.Writer, fb *frameBatch, n int) error {
	perBatch := len(fb.buf) / fb.frameLen
	for sent := 0; sent < n; {
		k := min(n-sent, perBatch)
		fb.number(uint64(sent+1), k)
		if _, err := w.Write(fb.buf[:k*fb.frameLen]); err != nil {
			return fmt.Errorf("write after %d messages: %w", sent, err)
		}
		sent += k
	}
	return nil
}

// readNumbered reads n data frames of size bytes and checks that they are
// numbered 1…n: nothing lost, repeated or reordered on the way.
func readNumbered(r *bufio.Reader, n, size, seqAt int, masked bool) error {
	var hdr [ws.MaxHeaderSize]byte
	buf := make([]byte, size)
	for i := 1; i <= n; i++ {
		h, err := ws.ReadHeaderBuffer(r, hdr[:])
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if h.OpCode != ws.OpText || !h.Fin || h.Length != int64(size) || h.Masked != masked {
			return fmt.Errorf("message %d: frame %v fin=%v masked=%v of %d bytes", i, h.OpCode, h.Fin, h.Masked, h.Length)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if masked {
			ws.Cipher(buf, h.Mask, 0)
		}
		if got := seqValue(buf[seqAt : seqAt+16]); got != uint64(i) {
			return fmt.Errorf("message %d arrived as %d", i, got)
		}
	}
	return nil
}

// seqValue reads the sequence digits putSeq wrote, counted from 1.
func seqValue(d []byte) uint64 {
	var v uint64
	for _, c := range d {
		v = v*10 + uint64(c-'0')
	}
	return v - seqBase
}

// BenchmarkForward measures messages through the proxy at full speed: the
// sender writes batches of frames, the receiver reads them all; the time is
// the last message's arrival. tether reads many frames per syscall and
// writes many per flush here.
func BenchmarkForward(b *testing.B) {
	for _, dir := range []string{"upstream_to_app", "app_to_upstream"} {
		for _, set := range []string{rulesNone, rulesSeq, rulesAll} {
			if set == rulesSeq && dir == "app_to_upstream" {
				continue // sequencing reads upstream messages only
			}
			for _, size := range benchSizes {
				name := fmt.Sprintf("%s/rules=%s/%dB", dir, set, size)
				b.Run(name, func(b *testing.B) {
					p := newBenchPath(b, set)
					benchStream(b, p, dir == "app_to_upstream", size)
				})
			}
		}
	}
}

func benchStream(b *testing.B, p *benchPath, toUpstream bool, size int) {
	batch := max(1, (64<<10)/(size+14))
	fb := newFrameBatch(size, batch, toUpstream)
	w, r := p.upstream, p.appR
	if toUpstream {
		w, r = p.app, p.upR
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	wrote := make(chan error, 1)
	go func() { wrote <- writeNumbered(w, fb, b.N) }()
	err := readNumbered(r, b.N, size, fb.seqAt, toUpstream)
	b.StopTimer()
	if err != nil {
		_ = w.Close() // unblocks the writer
	}
	werr := <-wrote
	if err := errors.Join(err, werr); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkForwardOneByOne sends one message and waits for it before the
// next: the sparse-traffic path, where each message costs tether a read and a
// write syscall of its own. ns/op is the one-way latency plus the raw ends'
// own syscalls; the direct case, the same raw ends connected to each other,
// is that floor: the difference is what tether adds.
func BenchmarkForwardOneByOne(b *testing.B) {
	for _, dir := range []string{"direct", "upstream_to_app", "app_to_upstream"} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%dB", dir, size), func(b *testing.B) {
				toUpstream := dir == "app_to_upstream"
				var w io.Writer
				var r *bufio.Reader
				switch dir {
				case "direct":
					w, r = directPair(b)
				case "upstream_to_app":
					p := newBenchPath(b, rulesAll)
					w, r = p.upstream, p.appR
				default:
					p := newBenchPath(b, rulesAll)
					w, r = p.app, p.upR
				}
				fb := newFrameBatch(size, 1, toUpstream)
				var hdr [ws.MaxHeaderSize]byte
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					fb.number(uint64(i+1), 1)
					if _, err := w.Write(fb.buf); err != nil {
						b.Fatalf("write: %v", err)
					}
					if err := readOne(r, hdr[:], size, toUpstream); err != nil {
						b.Fatalf("message %d: %v", i+1, err)
					}
				}
			})
		}
	}
}

// directPair is a loopback TCP connection whose ends play upstream and app
// with nothing in between.
func directPair(b *testing.B) (io.Writer, *bufio.Reader) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("listen: %v", err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, _ := ln.Accept()
		accepted <- nc
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	s := <-accepted
	if err != nil || s == nil {
		b.Fatalf("dial %v, accepted %v", err, s != nil)
	}
	b.Cleanup(func() {
		_ = c.Close()
		_ = s.Close()
	})
	return s, bufio.NewReaderSize(c, 64<<10)
}

// readOne reads one data frame of size bytes, discarding it. hdr is the
// caller's, so the loop does not allocate one per message.
func readOne(r *bufio.Reader, hdr []byte, size int, masked bool) error {
	h, err := ws.ReadHeaderBuffer(r, hdr)
	if err != nil {
		return err
	}
	if h.Length != int64(size) || h.Masked != masked {
		return fmt.Errorf("frame of %d bytes, masked=%v", h.Length, h.Masked)
	}
	_, err = r.Discard(size)
	return err
}
