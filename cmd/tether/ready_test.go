package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// fakeDial is an upstream probe dial that counts its calls and fails with
// err, or blocks until its context ends while block is set.
type fakeDial struct {
	mu    sync.Mutex
	calls int
	err   error
	block bool
	began chan struct{}
}

func (f *fakeDial) dial(ctx context.Context) error {
	f.mu.Lock()
	f.calls++
	err, block := f.err, f.block
	f.mu.Unlock()
	if block {
		f.began <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (f *fakeDial) set(err error, block bool) {
	f.mu.Lock()
	f.err, f.block = err, block
	f.mu.Unlock()
}

func (f *fakeDial) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// TestUpstreamProbeCaches: one dial answers every check within the TTL,
// success and failure alike; a check whose prober hung up is not cached; a
// check waiting behind a running dial gives up with its own context.
func TestUpstreamProbeCaches(t *testing.T) {
	const ttl = 5 * time.Second
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	f := &fakeDial{began: make(chan struct{}, 1)}
	p := newUpstreamProbe(f.dial, ttl, clock, zap.NewNop())
	ctx := context.Background()

	if err := p.check(ctx); err != nil || f.count() != 1 {
		t.Fatalf("first check = %v after %d dials, want nil after 1", err, f.count())
	}
	f.set(errors.New("refused"), false)
	now = now.Add(ttl - time.Nanosecond)
	if err := p.check(ctx); err != nil || f.count() != 1 {
		t.Fatalf("check within the TTL = %v after %d dials, want the cached nil", err, f.count())
	}
	now = now.Add(time.Nanosecond)
	err := p.check(ctx)
	if err == nil || !strings.Contains(err.Error(), "upstream probe failed: refused") || f.count() != 2 {
		t.Fatalf("check after the TTL = %v after %d dials, want a fresh failure", err, f.count())
	}
	if again := p.check(ctx); again == nil || f.count() != 2 {
		t.Fatalf("check within the TTL of a failure = %v after %d dials, want the cached failure", again, f.count())
	}

	now = now.Add(ttl)
	f.set(nil, true)
	hung, hangUp := context.WithCancel(ctx)
	result := make(chan error, 1)
	go func() { result <- p.check(hung) }()
	<-f.began
	waiting, giveUp := context.WithTimeout(ctx, 10*time.Millisecond)
	defer giveUp()
	if err := p.check(waiting); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("check behind a running dial = %v, want its own deadline", err)
	}
	hangUp()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Errorf("check whose prober hung up = %v, want context.Canceled", err)
	}
	f.set(nil, false)
	if err := p.check(ctx); err != nil || f.count() != 4 {
		t.Errorf("check after an abandoned probe = %v after %d dials, want a new dial", err, f.count())
	}
}

// TestReadyRequiresUpstream runs serveProxy with TETHER_READY_REQUIRES_UPSTREAM:
// /readyz dials the upstream (closing the probe with 1000), caches the result,
// and answers 503 with the reason while the upstream refuses. Without the
// variable, a refusing upstream does not make tether unready.
func TestReadyRequiresUpstream(t *testing.T) {
	up := newTestUpstream(t, upstreamtest.Options{})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":            up.URL(),
		"TETHER_READY_REQUIRES_UPSTREAM": "true",
	})
	awaitReadyz(t, r.adminURL, func(code int, _ string) bool { return code == http.StatusOK })
	probe := <-up.Conns()
	select {
	case <-probe.Done():
	case <-time.After(waitLimit):
		t.Fatal("probe connection still open")
	}
	if code, _, ok := probe.ReceivedClose(); !ok || code != 1000 {
		t.Errorf("probe closed with %d (close frame %v), want 1000", code, ok)
	}
	if code, _ := get(t, r.adminURL+"/readyz"); code != http.StatusOK || up.Handshakes() != 1 {
		t.Errorf("second /readyz = %d after %d upstream handshakes, want 200 from the cache after 1", code, up.Handshakes())
	}

	refusing := newTestUpstream(t, upstreamtest.Options{Handshake: func(upstreamtest.Handshake) (int, http.Header) {
		return http.StatusServiceUnavailable, nil
	}})
	down := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":            refusing.URL(),
		"TETHER_READY_REQUIRES_UPSTREAM": "true",
	})
	code, body := awaitReadyz(t, down.adminURL, func(_ int, body string) bool { return body != "not listening" })
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "upstream probe failed") || !strings.Contains(body, "503") {
		t.Errorf("/readyz = %d %q with the upstream refusing, want 503 naming the probe's HTTP 503", code, body)
	}

	plain := startProxy(t, map[string]string{"TETHER_UPSTREAM_URL": refusing.URL()})
	code, body = awaitReadyz(t, plain.adminURL, func(_ int, body string) bool { return body != "not listening" })
	if code != http.StatusOK {
		t.Errorf("/readyz = %d %q without TETHER_READY_REQUIRES_UPSTREAM, want 200 whatever the upstream", code, body)
	}
}

// awaitReadyz polls /readyz until done accepts its answer. serveProxy
// announces its address just before its accept loop registers the listener,
// and /readyz answers "not listening" until then.
func awaitReadyz(t *testing.T, adminURL string, done func(code int, body string) bool) (int, string) {
	t.Helper()
	var code int
	var body string
	eventually(t, "/readyz answer", func() bool {
		code, body = get(t, adminURL+"/readyz")
		return done(code, body)
	})
	return code, body
}

func TestReadyRequiresUpstreamConfig(t *testing.T) {
	cfg, err := config.Load(map[string]string{"TETHER_UPSTREAM_URL": "ws://127.0.0.1:1/"})
	if err != nil || cfg.ReadyRequiresUpstream {
		t.Fatalf("default: ReadyRequiresUpstream = %v (%v), want false", cfg.ReadyRequiresUpstream, err)
	}
	cfg, err = config.Load(map[string]string{"TETHER_UPSTREAM_URL": "ws://127.0.0.1:1/", "TETHER_READY_REQUIRES_UPSTREAM": "true"})
	if err != nil || !cfg.ReadyRequiresUpstream {
		t.Fatalf("true: ReadyRequiresUpstream = %v (%v), want true", cfg.ReadyRequiresUpstream, err)
	}
	_, err = config.Load(map[string]string{"TETHER_UPSTREAM_URL": "ws://127.0.0.1:1/", "TETHER_READY_REQUIRES_UPSTREAM": "sometimes"})
	if err == nil || !strings.Contains(err.Error(), "TETHER_READY_REQUIRES_UPSTREAM") {
		t.Errorf("invalid value: %v, want an error naming TETHER_READY_REQUIRES_UPSTREAM", err)
	}
}
