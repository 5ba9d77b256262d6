package memload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// flooder is the upstream: a WebSocket server that sends each connection
// numbered text messages "n|padding" as fast as the connection takes them,
// until stop. A connection that fails or closes is counted as lost: none
// may be, the budget only pauses.
type flooder struct {
	ln      net.Listener
	size    int
	count   func(i int) int // messages for connection i; 0: until halt
	begin   chan struct{}   // closed when the floods may start
	began   sync.Once
	stop    chan struct{}
	stopped sync.Once
	floods  sync.WaitGroup // the flood goroutines
	wg      sync.WaitGroup // every other goroutine

	mu    sync.Mutex
	sent  []int // messages written whole, by connection
	conns []net.Conn
	lost  atomic.Int64
}

// newFlooder floods with messages of size bytes, count(i) of them on
// connection i (0: until halt), once start is called.
func newFlooder(t *testing.T, size int, count func(i int) int) *flooder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &flooder{ln: ln, size: size, count: count, begin: make(chan struct{}), stop: make(chan struct{})}
	f.wg.Go(f.accept)
	t.Cleanup(f.close)
	return f
}

func (f *flooder) url() string { return "ws://" + f.ln.Addr().String() + "/" }

func (f *flooder) accept() {
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		// What the kernel buffers is not tether's memory, but it is what
		// the apps must read at the end: keep it small, so that the
		// test reads mostly what tether held.
		_ = nc.(*net.TCPConn).SetWriteBuffer(socketBuffer)
		f.mu.Lock()
		i := len(f.sent)
		f.sent = append(f.sent, 0)
		f.conns = append(f.conns, nc)
		f.mu.Unlock()
		f.floods.Go(func() { f.flood(i, nc) })
	}
}

// flood upgrades nc and writes messages until stop; a write that fails
// before stop is a lost connection.
func (f *flooder) flood(i int, nc net.Conn) {
	if _, err := ws.Upgrade(nc); err != nil {
		f.lost.Add(1)
		return
	}
	// tether's pings are read and answered here, as a live server does.
	var wmu sync.Mutex
	f.wg.Go(func() { f.answerPings(nc, &wmu) })
	padding := make([]byte, f.size)
	for k := range padding {
		padding[k] = 'x'
	}
	select {
	case <-f.begin:
	case <-f.stop:
		return
	}
	count := f.count(i)
	// Messages go out floodBatch to a write: a syscall per message would
	// make the test, not tether, the bottleneck.
	var out bytes.Buffer
	for n := 0; count == 0 || n < count; {
		select {
		case <-f.stop:
			return
		default:
		}
		out.Reset()
		k := 0
		for ; k < floodBatch && (count == 0 || n+k < count); k++ {
			msg := append(strconv.AppendInt(nil, int64(n+k), 10), '|')
			msg = append(msg, padding...)
			_ = ws.WriteHeader(&out, ws.Header{Fin: true, OpCode: ws.OpText, Length: int64(len(msg))})
			out.Write(msg)
		}
		wmu.Lock()
		_, err := nc.Write(out.Bytes())
		wmu.Unlock()
		if err != nil {
			select {
			case <-f.stop:
			default:
				f.lost.Add(1)
			}
			return
		}
		n += k
		f.mu.Lock()
		f.sent[i] = n
		f.mu.Unlock()
	}
}

// floodBatch is how many messages a flood writes at once.
const floodBatch = 8

// sentTo returns how many messages the connections of idx got whole.
func (f *flooder) sentTo(idx []int) (n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range idx {
		if i < len(f.sent) {
			n += f.sent[i]
		}
	}
	return n
}

func (f *flooder) answerPings(nc net.Conn, wmu *sync.Mutex) {
	r := bufio.NewReader(nc)
	for {
		h, err := ws.ReadHeader(r)
		if err != nil {
			return
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(r, p); err != nil {
			return
		}
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		if h.OpCode == ws.OpPing {
			wmu.Lock()
			_ = ws.WriteFrame(nc, ws.NewPongFrame(p))
			wmu.Unlock()
		}
	}
}

// start starts the floods, on every connection at once.
func (f *flooder) start() { f.began.Do(func() { close(f.begin) }) }

// halt stops every flood after the message it is writing, and returns how
// many messages each connection got whole. The apps must be reading, or a
// flood blocked on a paused one never ends: halt waits for the floods.
func (f *flooder) halt() []int {
	f.stopped.Do(func() { close(f.stop) })
	f.floods.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sent...)
}

func (f *flooder) close() {
	f.stopped.Do(func() { close(f.stop) })
	_ = f.ln.Close()
	f.mu.Lock()
	for _, nc := range f.conns {
		_ = nc.Close()
	}
	f.mu.Unlock()
	f.floods.Wait()
	f.wg.Wait()
}

// socketBuffer is the kernel buffer of the test's own sockets: the
// flooder's send buffers and the apps' receive buffers.
const socketBuffer = 64 << 10

// smallReceiveBuffer sets an app socket's receive buffer before it
// connects, when the TCP window is chosen.
func smallReceiveBuffer(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, socketBuffer)
	})
	return errors.Join(err, serr)
}

// speed is how an app reads.
type speed int

const (
	fast   speed = iota // as fast as it can
	slow                // one message per slowEvery
	paused              // nothing until resume
)

// slowEvery paces a slow app: about 60 messages a second.
const slowEvery = 16 * time.Millisecond

// app is one WebSocket app behind tether reading its session's numbered
// stream and checking it: in order, nothing missing, nothing twice.
type app struct {
	conn   net.Conn
	speed  speed
	resume chan struct{}
	done   chan struct{}

	got     atomic.Int64 // messages read, all in order
	atFlood int64        // got when the floods stopped
	err     error        // the first fault, once done is closed
}

// dead reports whether the app's reader has ended.
func (a *app) dead() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

func dialApp(t *testing.T, url string, s speed) *app {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	d := ws.Dialer{NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{Control: smallReceiveBuffer}).DialContext(ctx, network, addr)
	}}
	conn, br, _, err := d.Dial(ctx, url)
	if err != nil {
		t.Fatalf("app dial: %v", err)
	}
	a := &app{conn: conn, speed: s, resume: make(chan struct{}), done: make(chan struct{})}
	var r *bufio.Reader
	if br != nil {
		r = br
	} else {
		r = bufio.NewReader(conn)
	}
	go a.read(r)
	t.Cleanup(func() {
		a.start() // a paused app waits for nothing else
		_ = conn.Close()
		<-a.done
	})
	return a
}

// read checks the stream; a paused app starts at resume.
func (a *app) read(r *bufio.Reader) {
	defer close(a.done)
	if a.speed == paused {
		<-a.resume
	}
	var tick *time.Ticker
	if a.speed == slow {
		tick = time.NewTicker(slowEvery)
		defer tick.Stop()
	}
	var buf []byte
	for {
		if tick != nil {
			select {
			case <-tick.C:
			case <-a.resume: // the floods stopped: read the rest at once
				tick.Stop()
				tick = nil
			}
		}
		h, err := ws.ReadHeader(r)
		if err != nil {
			a.fail(err)
			return
		}
		if h.Length > 1<<20 || !h.Fin || h.Masked {
			a.err = fmt.Errorf("frame %+v: want a whole unmasked message of at most 1 MiB", h)
			return
		}
		buf = slices.Grow(buf[:0], int(h.Length))[:h.Length]
		if _, err := io.ReadFull(r, buf); err != nil {
			a.fail(err)
			return
		}
		if h.OpCode.IsControl() {
			continue
		}
		if err := a.check(buf); err != nil {
			a.err = err
			return
		}
	}
}

func (a *app) check(data []byte) error {
	i := 0
	for i < len(data) && data[i] != '|' {
		i++
	}
	n, err := strconv.ParseInt(string(data[:i]), 10, 64)
	if err != nil {
		return fmt.Errorf("message %q…: not numbered", data[:min(len(data), 16)])
	}
	if want := a.got.Load(); n != want {
		return fmt.Errorf("got message %d, want %d: a gap or a duplicate", n, want)
	}
	a.got.Add(1)
	return nil
}

// fail records why the stream ended; the socket the test closed is no
// fault.
func (a *app) fail(err error) {
	if !errors.Is(err, net.ErrClosed) {
		a.err = err
	}
}

// start lets a paused app read, and a slow one read the rest at once.
func (a *app) start() {
	select {
	case <-a.resume:
	default:
		close(a.resume)
	}
}

// connections returns how many connections the flooder accepted.
func (f *flooder) connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent)
}
