package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
)

// sinkReadBuffer is the sink's read buffer: large, so the sink reads a backlog
// in few syscalls and is not what limits throughput.
const sinkReadBuffer = 64 << 10

// sinkConfig describes one run of the sink.
type sinkConfig struct {
	url      string
	duration time.Duration // from the handshake to the end of the run
	warmup   time.Duration // excluded from the measurement window
	latency  bool          // record each message's delay
	expect   int           // messages expected in the window (preallocation)
	cpu      func() cpuMark
}

// cpuMark is CPU time, in clock ticks, spent by the proxy and by this process.
type cpuMark struct {
	proxy, self int64
}

// mark is the sink's state at one edge of the measurement window.
type mark struct {
	at          time.Time
	msgs, bytes int64
	cpu         cpuMark
}

// sinkResult is what one run measured between the two marks.
type sinkResult struct {
	start, end mark
	delays     []int64 // nanoseconds from send to receipt, latency runs only
}

// sink reads one connection and checks the sequence: message 1 first, then each
// number once, in order.
type sink struct {
	r         *bufio.Reader
	latency   bool
	recording atomic.Bool
	stopped   atomic.Bool
	msgs      atomic.Int64
	bytes     atomic.Int64
	last      uint64
	delays    []int64
}

var errPeerClosed = errors.New("the feed side closed the connection during the run")

// runSink connects to url, reads for cfg.duration and measures the window that
// follows the warm-up. Any lost, repeated or reordered message fails the run.
func runSink(ctx context.Context, cfg sinkConfig) (sinkResult, error) {
	nc, r, err := dialWS(ctx, cfg.url, sinkReadBuffer)
	if err != nil {
		return sinkResult{}, err
	}
	s := &sink{r: r, latency: cfg.latency}
	if cfg.latency {
		s.delays = make([]int64, 0, cfg.expect+cfg.expect/2)
	}
	readDone := make(chan error, 1)
	go func() { readDone <- s.read() }()
	res, err := s.control(ctx, cfg, nc, readDone)
	res.delays = s.delays
	return res, err
}

// control marks the window and ends the run; the reader has stopped when it
// returns.
func (s *sink) control(ctx context.Context, cfg sinkConfig, nc net.Conn, readDone <-chan error) (sinkResult, error) {
	var res sinkResult
	t := time.NewTimer(cfg.warmup)
	defer t.Stop()
	if err := s.await(ctx, t, nc, readDone); err != nil {
		return res, err
	}
	res.start = s.mark(cfg.cpu)
	s.recording.Store(true)
	t.Reset(cfg.duration - cfg.warmup)
	if err := s.await(ctx, t, nc, readDone); err != nil {
		return res, err
	}
	res.end = s.mark(cfg.cpu)
	s.stop(nc)
	if err := <-readDone; err != nil {
		return res, err
	}
	return res, nil
}

// await waits for t; the reader ending first is a failure of the run.
func (s *sink) await(ctx context.Context, t *time.Timer, nc net.Conn, readDone <-chan error) error {
	select {
	case <-t.C:
		return nil
	case err := <-readDone:
		_ = nc.Close()
		return fmt.Errorf("sink stopped after %d messages: %w", s.msgs.Load(), err)
	case <-ctx.Done():
		s.stop(nc)
		<-readDone
		return ctx.Err()
	}
}

func (s *sink) mark(cpu func() cpuMark) mark {
	m := mark{at: time.Now(), msgs: s.msgs.Load(), bytes: s.bytes.Load()}
	if cpu != nil {
		m.cpu = cpu()
	}
	return m
}

// stop sends a close frame and closes the socket without waiting for the echo:
// the reader is behind a backlog that nobody needs any more.
func (s *sink) stop(nc net.Conn) {
	s.stopped.Store(true)
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(clientCloseFrame())
	_ = nc.Close()
}

// read is the sink's reader goroutine. It returns nil once stop closed the
// socket.
func (s *sink) read() error {
	var hdr [ws.MaxHeaderSize]byte
	buf := make([]byte, 64<<10)
	for {
		h, err := ws.ReadHeaderBuffer(s.r, hdr[:])
		if err != nil {
			return s.endErr(err)
		}
		if h.OpCode.IsControl() {
			if h.OpCode == ws.OpClose {
				return s.endErr(errPeerClosed)
			}
			if _, err := s.r.Discard(int(h.Length)); err != nil {
				return s.endErr(err)
			}
			continue
		}
		if !h.Fin || h.Masked || h.Length > 1<<30 {
			return fmt.Errorf("unexpected frame: fin %v, masked %v, %d bytes", h.Fin, h.Masked, h.Length)
		}
		n := int(h.Length)
		if n > len(buf) {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(s.r, buf[:n]); err != nil {
			return s.endErr(err)
		}
		if err := s.message(buf[:n]); err != nil {
			return err
		}
	}
}

func (s *sink) message(p []byte) error {
	seq, ts, err := parseMessage(p)
	if err != nil {
		return fmt.Errorf("message after %d: %w", s.last, err)
	}
	if seq != s.last+1 {
		return fmt.Errorf("message %d after %d: lost, repeated or reordered", seq, s.last)
	}
	s.last = seq
	if s.latency && s.recording.Load() {
		s.delays = append(s.delays, nowNanos()-ts)
	}
	s.msgs.Add(1)
	s.bytes.Add(int64(len(p)))
	return nil
}

// endErr is nil for the socket error that stop causes.
func (s *sink) endErr(err error) error {
	if s.stopped.Load() {
		return nil
	}
	return err
}

// dialWS opens a WebSocket client connection and returns a reader that starts
// with whatever the server sent together with its handshake response.
func dialWS(ctx context.Context, url string, readBuffer int) (net.Conn, *bufio.Reader, error) {
	d := ws.Dialer{Timeout: handshakeTimeout}
	nc, br, _, err := d.Dial(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", url, err)
	}
	var src io.Reader = nc
	if br != nil {
		early := make([]byte, br.Buffered())
		_, _ = io.ReadFull(br, early) // buffered: cannot fail
		ws.PutReader(br)
		src = io.MultiReader(bytes.NewReader(early), nc)
	}
	return nc, bufio.NewReaderSize(src, readBuffer), nil
}
