package proxy_test

import (
	"context"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tetherproxy/tether/proxy"
)

// What an idle WebSocket session may cost, from what it cost when these
// bounds were set (docs/performance.md "What is left of an idle session"):
// 2 goroutines, the two sockets' readers, each parked on its first 2 KiB
// stack (3.9 to 4.3 KiB counted), and 8.5 to 8.7 KiB of heap, of which
// about 0.5 KiB are the test's own two sockets of each session. Each bound
// is the measured figure plus less than one more 2 KiB stack, or about
// 1 KiB of heap: one goroutine more, one stack doubled, or a KiB more held
// per session fails.
const (
	idleStackLimit = 5 << 10
	idleHeapLimit  = 19 << 9 // 9.5 KiB
)

// TestIdleSessionMemory measures what idle sessions add to the process:
// goroutine stacks as they are when the sessions park (before any
// collection shrinks them, as an idle process seldom collects) and the heap
// they keep live, per session, over many sessions. The configuration is
// the tether binary's by default: sequencing on, the heartbeat and the
// memory budget on, a JSON logger at warn. The app and upstream ends run no
// goroutine, so every goroutine and stack counted is tether's.
//
// The runtime starts each new goroutine with a stack of the average size
// it found parked at the last collection: in a long-running tether, that of
// its idle sessions' goroutines, since they are nearly all of them. So a
// first batch of sessions is opened and collected, and the second batch is
// measured, with collections off until its stacks are counted.
//
// Under the race detector stacks are larger (instrumentation, a doubled
// stack guard), and only the heap is checked.
func TestIdleSessionMemory(t *testing.T) {
	const sessions = 200
	e := newIdleEnv(t, sessions)
	e.open(t, 1)
	e.closeAll(t)
	e.open(t, sessions) // sets the goroutines' starting stack size at the next collection
	runtime.GC()

	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	h0 := heapAfterGC()
	s0 := stackInuse()
	e.open(t, sessions)
	stack := float64(stackInuse()-s0) / sessions
	heap := float64(heapAfterGC()-h0) / sessions
	t.Logf("per idle session: stacks %.0f B, heap %.0f B (%d sessions)", stack, heap, sessions)
	if !raceEnabled && stack > idleStackLimit {
		t.Errorf("goroutine stacks per idle session: %.0f B, want at most %d", stack, idleStackLimit)
	}
	if heap > idleHeapLimit {
		t.Errorf("heap per idle session: %.0f B, want at most %d", heap, idleHeapLimit)
	}
}

// idleEnv is a Server between raw app ends and a silent upstream.
type idleEnv struct {
	srv   *proxy.Server
	url   string
	up    *silentUpstream
	apps  []net.Conn
	goros int // tether's goroutines before the sessions open
}

func newIdleEnv(t *testing.T, sessions int) *idleEnv {
	up := newSilentUpstream(t)
	opts := benchOptions(t, up.url(), rulesSeq)
	opts.MaxSessions = 2*sessions + 1
	opts.Logger = warnLogger()
	srv, err := proxy.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serve(t, srv, ln)
	e := &idleEnv{srv: srv, url: "ws://" + ln.Addr().String() + "/", up: up, goros: tetherGoroutines()}
	t.Cleanup(func() {
		for _, a := range e.apps {
			_ = a.Close()
		}
		up.close()
		stop()
	})
	return e
}

// open opens n more sessions and waits until all are idle: the handshakes'
// and dials' goroutines, the restores and the writers of the handshakes'
// last frames have exited, which nothing signals, and each session has at
// most its two goroutines.
func (e *idleEnv) open(t *testing.T, n int) {
	t.Helper()
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		nc, br, _, err := ws.Dialer{}.Dial(ctx, e.url)
		cancel()
		if err != nil {
			t.Fatalf("app dial: %v", err)
		}
		if br != nil {
			ws.PutReader(br)
		}
		e.apps = append(e.apps, nc)
	}
	open := len(e.apps)
	eventually(t, "sessions open", func() bool { return e.srv.Sessions() == open })
	eventually(t, "sessions idle", func() bool { return tetherGoroutines()-e.goros <= 2*open })
}

// closeAll closes every app and waits for the sessions to end.
func (e *idleEnv) closeAll(t *testing.T) {
	t.Helper()
	for _, a := range e.apps {
		_ = a.Close()
	}
	e.apps = nil
	eventually(t, "sessions ended", func() bool { return e.srv.Sessions() == 0 })
}

func stackInuse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.StackInuse
}

// heapAfterGC is the live heap once the pools' contents are collected (a
// pooled buffer survives one collection in the victim cache).
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// warnLogger is the binary's logger at TETHER_LOG_LEVEL=warn, writing
// nowhere.
func warnLogger() *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(discard{}), zapcore.WarnLevel))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// silentUpstream accepts WebSocket connections and keeps them open, silent,
// with no goroutine per connection.
type silentUpstream struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newSilentUpstream(t *testing.T) *silentUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &silentUpstream{ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if _, err := (ws.Upgrader{}).Upgrade(nc); err != nil {
				_ = nc.Close()
				continue
			}
			u.mu.Lock()
			u.conns = append(u.conns, nc)
			u.mu.Unlock()
		}
	}()
	return u
}

func (u *silentUpstream) url() string { return "ws://" + u.ln.Addr().String() + "/" }

func (u *silentUpstream) close() {
	_ = u.ln.Close()
	u.wg.Wait()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.conns {
		_ = c.Close()
	}
}
