package churn_test

import (
	"context"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// inProcessSessions is the in-process churn's length: under -race each
// session costs several times what it does in the binary, and what this
// test adds (goleak's stacks of a leaked goroutine) shows with fewer.
const inProcessSessions = 2_000

// TestChurnInProcess plays the churn against proxy.Server in the test
// process: when the apps are gone, the process's goroutines and open
// descriptors are back at their baseline, and goleak (TestMain) checks that
// nothing outlives the server's shutdown.
func TestChurnInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("churn skipped with -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("open descriptors are read from /proc/self/fd, which only Linux has")
	}
	u := newUpstream(t)
	srv, tg := serveInProcess(t, u.URL())
	churn(t, tg, u, warmup, 3)
	// endBound after the last app left, everything its session started
	// has ended: the baseline.
	waitUntil(time.Now().Add(endBound))
	base := awaitInProcess(t, srv, time.Now(), nil)

	began := time.Now()
	tl, f := churn(t, tg, u, inProcessSessions, 4)
	left := time.Now()
	t.Logf("churn of %d sessions in %v, %d upstream resets, %d restarts: %s",
		inProcessSessions, left.Sub(began).Round(time.Millisecond), f.resets, f.restarts, tl)
	final := awaitInProcess(t, srv, left, &base)
	t.Logf("baseline: %d goroutines, %d fds; after the churn: %d goroutines, %d fds",
		base.goroutines, base.fds, final.goroutines, final.fds)
	if final.goroutines != base.goroutines || final.fds != base.fds {
		t.Errorf("after the churn: %d goroutines and %d open descriptors, baseline %d and %d",
			final.goroutines, final.fds, base.goroutines, base.fds)
	}
}

// serveInProcess runs tether's three listeners on the configuration of
// tetherEnv; cleanup shuts it down.
func serveInProcess(t *testing.T, upstreamURL string) (*proxy.Server, targets) {
	t.Helper()
	srv, err := proxy.New(proxy.Options{
		Upstream: upstream.Options{
			URL:             upstreamURL,
			DialTimeout:     dialTimeout,
			Backoff:         upstream.Backoff{Jitter: upstream.JitterFull, Base: backoffBase, Cap: backoffCap},
			StableAfter:     50 * time.Millisecond,
			MaxMessageBytes: 1 << 20,
		},
		AcceptWait:            acceptWait,
		OutboxMaxMessages:     1024,
		OutboxMaxBytes:        1 << 20,
		OutboxOverflow:        buffer.OverflowClose,
		MaxSessions:           maxSessions,
		MaxMessageBytes:       1 << 20,
		DownstreamBufferBytes: 1 << 20,
		SSELinger:             sseLinger,
		Logger:                zaptest.NewLogger(t, zaptest.Level(zapcore.ErrorLevel)),
	})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	kinds := []proxy.ListenerKind{proxy.ListenerWS, proxy.ListenerTCP, proxy.ListenerSSE}
	addrs := make([]string, len(kinds))
	served := make(chan error, len(kinds))
	for i, kind := range kinds {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		addrs[i] = ln.Addr().String()
		var l net.Listener = ln
		if kind == proxy.ListenerSSE {
			l = &proxy.SSEListener{Listener: ln, Path: ssePath}
		}
		go func() { served <- srv.ServeKind(l, kind) }()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), endBound)
		defer cancel()
		if err := srv.Shutdown(ctx, 0); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		for range kinds {
			if err := <-served; err != nil {
				t.Errorf("ServeKind: %v", err)
			}
		}
	})
	return srv, targets{ws: addrs[0], tcp: addrs[1], sse: addrs[2], ssePath: ssePath}
}

// processCounts is the test process's goroutines and open descriptors.
type processCounts struct{ goroutines, fds int }

func countProcess(t *testing.T) processCounts {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("open descriptors: %v", err)
	}
	// ReadDir's own descriptor on the directory is among the entries,
	// every time alike.
	return processCounts{goroutines: runtime.NumGoroutine(), fds: len(entries)}
}

// awaitInProcess waits, at most endBound from start, for the server to
// have no session and, with base, for the process to be back at or below
// it; it returns the counts then.
func awaitInProcess(t *testing.T, srv *proxy.Server, start time.Time, base *processCounts) processCounts {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c := countProcess(t)
		if srv.Sessions() == 0 && (base == nil || (c.goroutines <= base.goroutines && c.fds <= base.fds)) {
			return c
		}
		if time.Since(start) > endBound {
			t.Errorf("%v after the last app left: %d sessions, %d goroutines, %d fds", endBound, srv.Sessions(), c.goroutines, c.fds)
			return c
		}
		<-tick.C
	}
}
