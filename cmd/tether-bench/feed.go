package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
)

// mode is what the feed does on a new connection.
type mode int

const (
	modeMax  mode = iota // stream as fast as the connection takes it
	modeRate             // stream at a fixed rate
	modeIdle             // send nothing; answer pings
)

func (m mode) String() string {
	switch m {
	case modeMax:
		return "max"
	case modeRate:
		return "rate"
	default:
		return "idle"
	}
}

// scenario is what the feed serves to the connections of one run.
type scenario struct {
	mode mode
	size int // bytes per message
	rate int // messages per second, modeRate
}

// batchBytes is how much the feed writes per syscall at full speed: a real
// feed server writes what it has, and a small write per message would make
// the feed, not the path under test, the bottleneck.
const batchBytes = 64 << 10

// maxBurst bounds one paced write after a late timer: the messages due are
// sent together, each stamped with the time it was actually written.
const maxBurst = 1024

// feed is the sequenced feed server. The scenario is set before each run and
// read when a connection arrives, so the same upstream URL serves every run
// whatever sits in between (tether always dials the same URL).
type feed struct {
	ln     net.Listener
	cur    atomic.Pointer[scenario]
	active atomic.Int64 // connections being served

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	err   error // first unexpected failure, taken by takeErr
	done  bool
}

func startFeed() (*feed, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("feed listen: %w", err)
	}
	f := &feed{ln: ln, conns: map[net.Conn]struct{}{}}
	f.set(scenario{mode: modeIdle})
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.acceptLoop()
	}()
	return f, nil
}

// URL is the feed's WebSocket URL.
func (f *feed) URL() string { return "ws://" + f.ln.Addr().String() + "/feed" }

// Addr is the feed's host:port.
func (f *feed) Addr() string { return f.ln.Addr().String() }

func (f *feed) set(sc scenario) { f.cur.Store(&sc) }

// Close stops accepting, closes every connection and waits for their goroutines.
func (f *feed) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	f.done = true
	for nc := range f.conns {
		_ = nc.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}

func (f *feed) acceptLoop() {
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				f.fail(fmt.Errorf("feed accept: %w", err))
			}
			return
		}
		if !f.track(nc) {
			_ = nc.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(nc)
			f.serve(nc)
		}()
	}
}

func (f *feed) track(nc net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	f.conns[nc] = struct{}{}
	f.active.Add(1)
	return true
}

func (f *feed) untrack(nc net.Conn) {
	_ = nc.Close()
	f.mu.Lock()
	delete(f.conns, nc)
	f.mu.Unlock()
	f.active.Add(-1)
}

// fail records the first unexpected failure for the current run to report.
func (f *feed) fail(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

// takeErr returns and clears the recorded failure.
func (f *feed) takeErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.err
	f.err = nil
	return err
}

// waitIdle waits until no connection of an earlier run is left, so runs never
// overlap: a proxy still draining the last run's backlog would steal CPU.
func (f *feed) waitIdle(ctx context.Context, limit time.Duration) error {
	if f.active.Load() == 0 {
		return nil
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for f.active.Load() != 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("feed still has %d connections %v after the run", f.active.Load(), limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// handshakeTimeout bounds a feed or sink handshake on loopback.
const handshakeTimeout = 10 * time.Second

func (f *feed) serve(nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	if _, err := (ws.Upgrader{}).Upgrade(nc); err != nil {
		f.fail(fmt.Errorf("feed handshake: %w", err))
		return
	}
	_ = nc.SetDeadline(time.Time{})
	sc := *f.cur.Load()
	c := &feedConn{nc: nc, done: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		c.readLoop()
	}()
	switch sc.mode {
	case modeMax:
		c.streamMax(sc.size)
	case modeRate:
		c.streamPaced(sc.size, sc.rate)
	case modeIdle:
		<-c.done
	}
	_ = nc.Close()
	<-read
}

// feedConn is one feed connection: a streaming writer and a reader that answers
// pings; mu keeps their writes whole.
type feedConn struct {
	nc   net.Conn
	mu   sync.Mutex
	done chan struct{} // closed when the reader has stopped
}

func (c *feedConn) write(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// streamMax writes batches of numbered messages until the connection fails;
// each batch is stamped with the time it is written.
func (c *feedConn) streamMax(size int) {
	msg, err := newMessage(size)
	if err != nil {
		return
	}
	hl := headerLen(size)
	frameLen := hl + size
	per := max(1, batchBytes/frameLen)
	buf := make([]byte, 0, per*frameLen)
	for range per {
		buf = appendHeader(buf, ws.OpText, size)
		buf = append(buf, msg...)
	}
	var seq uint64
	for {
		ts := nowNanos()
		for i := range per {
			seq++
			stamp(buf[i*frameLen+hl:(i+1)*frameLen], seq, ts)
		}
		if c.write(buf) != nil {
			return
		}
	}
}

// streamPaced writes message i at start + i/rate. When the timer fires late,
// the messages due are written together, stamped with the actual write time.
func (c *feedConn) streamPaced(size, rate int) {
	msg, err := newMessage(size)
	if err != nil || rate <= 0 {
		return
	}
	interval := time.Second / time.Duration(rate)
	hl := headerLen(size)
	buf := make([]byte, 0, 16*(hl+size))
	start := time.Now()
	var sent uint64
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.done:
			return
		}
		due := uint64(time.Since(start)/interval) + 1
		if due > sent {
			buf = buf[:0]
			ts := nowNanos()
			for range min(due-sent, maxBurst) {
				sent++
				buf = appendHeader(buf, ws.OpText, size)
				at := len(buf)
				buf = append(buf, msg...)
				stamp(buf[at:], sent, ts)
			}
			if c.write(buf) != nil {
				return
			}
		}
		t.Reset(time.Until(start.Add(time.Duration(sent) * interval)))
	}
}

// readLoop reads what the other side sends (pings, a close, nothing else in
// these runs), answers pings and echoes the close, and closes done when the
// connection ends.
func (c *feedConn) readLoop() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.nc, 512)
	var hdr [ws.MaxHeaderSize]byte
	var ctl [125]byte
	for {
		h, err := ws.ReadHeaderBuffer(br, hdr[:])
		if err != nil {
			return
		}
		if !h.OpCode.IsControl() || h.Length > int64(len(ctl)) {
			if _, err := io.CopyN(io.Discard, br, h.Length); err != nil {
				return
			}
			continue
		}
		p := ctl[:h.Length]
		if _, err := io.ReadFull(br, p); err != nil {
			return
		}
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		switch h.OpCode {
		case ws.OpPing:
			if c.write(append(appendHeader(nil, ws.OpPong, len(p)), p...)) != nil {
				return
			}
		case ws.OpClose:
			_ = c.write(append(appendHeader(nil, ws.OpClose, len(p)), p...))
			_ = c.nc.Close()
			return
		}
	}
}
