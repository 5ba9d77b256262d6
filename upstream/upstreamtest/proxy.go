package upstreamtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// FaultProxy is a TCP proxy on 127.0.0.1 in front of a target address that
// injects network faults on demand. Its methods are safe for concurrent use;
// every setting applies to live and future connections from the next chunk
// of bytes on.
type FaultProxy struct {
	target string
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc

	latency atomic.Int64 // time.Duration
	rate    atomic.Int64 // bytes per second per direction; 0 = unlimited
	slice   atomic.Int64
	refuse  atomic.Bool

	mu     sync.Mutex
	links  map[*link]struct{}
	resume chan struct{} // non-nil while blackholed; closed when traffic resumes
	closed bool

	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// flowing is a closed channel: the gate while traffic flows.
var flowing = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// NewFaultProxy starts a proxy listening on 127.0.0.1:0 that forwards every
// connection to target ("host:port").
func NewFaultProxy(target string) (*FaultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &FaultProxy{
		target: target,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		links:  make(map[*link]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's listening address, "127.0.0.1:PORT".
func (p *FaultProxy) Addr() string { return p.ln.Addr().String() }

// URL is "ws://" + Addr + "/".
func (p *FaultProxy) URL() string { return "ws://" + p.Addr() + "/" }

// SetLatency delays every chunk of bytes by d, in both directions. 0 turns it
// off. Each direction forwards one chunk (up to 32 KiB, as read) at a time,
// so latency also caps throughput, which is fine for tests.
func (p *FaultProxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// SetBandwidth limits each direction of every link to about bytesPerSec:
// each write waits the time its bytes take at that rate. 0 turns it off.
func (p *FaultProxy) SetBandwidth(bytesPerSec int64) { p.rate.Store(bytesPerSec) }

// SetSlice makes the proxy forward at most n bytes per Write, so frames
// straddle TCP segments. n <= 0 turns slicing off.
func (p *FaultProxy) SetSlice(n int) { p.slice.Store(int64(n)) }

// RefuseNew makes the proxy close new incoming connections right after
// accepting them (the client sees EOF during its handshake).
func (p *FaultProxy) RefuseNew(on bool) { p.refuse.Store(on) }

// Blackhole stops (on) or resumes forwarding in both directions on every
// connection, new ones included. TCP stays open and bytes are held, not
// dropped: each side sees a half-open peer, and when traffic resumes the
// streams continue intact.
func (p *FaultProxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.resume == nil:
		p.resume = make(chan struct{})
	case !on && p.resume != nil:
		close(p.resume)
		p.resume = nil
	}
}

// gate returns a channel that is closed while traffic may flow.
func (p *FaultProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		return p.resume
	}
	return flowing
}

// ResetAll aborts every live proxied connection with a TCP RST on both sides.
func (p *FaultProxy) ResetAll() {
	for _, l := range p.snapshot() {
		p.closeLink(l, true)
	}
}

// Conns is the number of live proxied connections.
func (p *FaultProxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops the listener, closes every proxied connection and waits for
// all of the proxy's goroutines. It is idempotent.
func (p *FaultProxy) Close() error {
	p.closeOnce.Do(func() {
		p.cancel()
		p.closeErr = p.ln.Close()
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		for _, l := range p.snapshot() {
			p.closeLink(l, false)
		}
		p.wg.Wait()
	})
	return p.closeErr
}

func (p *FaultProxy) snapshot() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	return out
}

func (p *FaultProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if !p.waitAfterAcceptError(err) {
				return
			}
			continue
		}
		p.wg.Add(1)
		go p.serve(conn)
	}
}

// waitAfterAcceptError reports whether accepting should go on after err,
// waiting a little first so a persistent error does not spin the loop.
func (p *FaultProxy) waitAfterAcceptError(err error) bool {
	if errors.Is(err, net.ErrClosed) || p.ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(acceptRetryDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}
