package upstreamtest

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// chunkSize is the most bytes one read moves through the proxy.
const chunkSize = 32 << 10

// link is one proxied connection: the client side and the target side.
type link struct {
	client, server net.Conn
	done           chan struct{} // closed when the link is torn down
	once           sync.Once
}

// close tears both sides down, with RST when reset is set. Idempotent.
func (l *link) close(reset bool) {
	l.once.Do(func() {
		if reset {
			setLingerZero(l.client)
			setLingerZero(l.server)
		}
		_ = l.client.Close()
		_ = l.server.Close()
		close(l.done)
	})
}

// serve owns one accepted client connection until both directions end.
func (p *FaultProxy) serve(client net.Conn) {
	defer p.wg.Done()
	if p.refuse.Load() {
		_ = client.Close()
		return
	}
	var d net.Dialer
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		// The target is down: the client sees its connection closed
		// before any handshake answer, as with RefuseNew.
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server, done: make(chan struct{})}
	if !p.track(l) {
		l.close(false)
		return
	}
	upDone := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(upDone)
		p.pipe(l, client, server)
	}()
	p.pipe(l, server, client)
	<-upDone
	p.closeLink(l, false)
}

func (p *FaultProxy) track(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

// closeLink tears l down and forgets it at once, so Conns reflects ResetAll
// as soon as it returns.
func (p *FaultProxy) closeLink(l *link, reset bool) {
	l.close(reset)
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pipe copies src to dst through the fault settings until src ends.
func (p *FaultProxy) pipe(l *link, src, dst net.Conn) {
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.forward(l, dst, buf[:n]) {
			return
		}
		if err != nil {
			p.endPipe(l, dst, err)
			return
		}
	}
}

// endPipe propagates the end of one direction: a clean EOF becomes a
// half-close of the other side (the other direction goes on), a reset
// becomes a reset of both sides, anything else closes the link.
func (p *FaultProxy) endPipe(l *link, dst net.Conn, err error) {
	switch {
	case errors.Is(err, io.EOF):
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
			return
		}
		p.closeLink(l, false)
	case errors.Is(err, syscall.ECONNRESET):
		p.closeLink(l, true)
	default:
		p.closeLink(l, false)
	}
}

// forward writes chunk to dst after the configured latency, in slices,
// holding while blackholed. It reports false when the link is gone.
func (p *FaultProxy) forward(l *link, dst net.Conn, chunk []byte) bool {
	if d := time.Duration(p.latency.Load()); d > 0 && !waitFor(d, l.done) {
		return false
	}
	slice := int(p.slice.Load())
	for len(chunk) > 0 {
		select {
		case <-p.gate():
		case <-l.done:
			return false
		}
		n := len(chunk)
		if slice > 0 && n > slice {
			n = slice
		}
		if rate := p.rate.Load(); rate > 0 && !waitFor(time.Duration(int64(n)*int64(time.Second)/rate), l.done) {
			return false
		}
		if _, err := dst.Write(chunk[:n]); err != nil {
			// The destination is gone (RST or closed): abort both sides
			// the way a direct connection would have failed.
			p.closeLink(l, true)
			return false
		}
		chunk = chunk[n:]
	}
	return true
}

// waitFor waits d unless done closes first; it reports whether d elapsed.
func waitFor(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
