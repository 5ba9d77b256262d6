package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

// startAdmin runs an admin server on a free loopback port and returns its base URL.
func startAdmin(t *testing.T, ready func(context.Context) error, metrics http.Handler) (*adminServer, string) {
	t.Helper()
	a := newAdminServer("127.0.0.1:0", adminHandlers{Ready: ready, Metrics: metrics}, zap.NewNop())
	addr, err := a.Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return a, "http://" + addr.String()
}

// get fetches url with a fresh, non-pooled client so no idle connection or
// transport goroutine outlives the test (goleak checks).
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, strings.TrimSpace(string(body))
}

func TestAdminHealthz(t *testing.T) {
	_, base := startAdmin(t, func(context.Context) error { return errors.New("not yet") }, nil)
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok even while not ready", code, body)
	}
}

func TestAdminReadyz(t *testing.T) {
	var isReady atomic.Bool
	ready := func(context.Context) error {
		if !isReady.Load() {
			return errors.New("upstream not connected")
		}
		return nil
	}
	_, base := startAdmin(t, ready, nil)
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || body != "upstream not connected" {
		t.Errorf("/readyz = %d %q, want 503 with the reason", code, body)
	}
	isReady.Store(true)
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || body != "ready" {
		t.Errorf("/readyz = %d %q, want 200 ready", code, body)
	}
}

func TestAdminMetrics(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "tether_sessions 0\n")
	})
	_, base := startAdmin(t, nil, metrics)
	if code, body := get(t, base+"/metrics"); code != http.StatusOK || body != "tether_sessions 0" {
		t.Errorf("/metrics = %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with nil ready func = %d %q, want 200", code, body)
	}

	_, noMetrics := startAdmin(t, nil, nil)
	if code, _ := get(t, noMetrics+"/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics without handler = %d, want 404", code)
	}
	if code, _ := get(t, noMetrics+"/other"); code != http.StatusNotFound {
		t.Errorf("/other = %d, want 404", code)
	}
}

func TestAdminRejectsOversizedHeaders(t *testing.T) {
	_, base := startAdmin(t, nil, nil)
	req, err := http.NewRequest(http.MethodGet, base+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 2*adminMaxHeaderBytes))
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status = %d, want 431", resp.StatusCode)
	}
}

// Shutdown must return promptly even with an idle client connection open,
// and the port must be released (the serving goroutine has exited).
func TestAdminShutdown(t *testing.T) {
	a := newAdminServer("127.0.0.1:0", adminHandlers{}, zap.NewNop())
	addr, err := a.Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := a.Start(); err == nil {
		t.Error("second Start succeeded, want an error")
	}
	// A keep-alive connection left idle after a request, as Prometheus leaves
	// its scrape connections.
	idle, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	resp.Body.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Shutdown took %v with only an idle connection", d)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Errorf("port still held after Shutdown: %v", err)
	} else {
		ln.Close()
	}
}

// A request stuck in a handler past the shutdown deadline is cut off:
// Shutdown reports the deadline and still waits for the server goroutine.
func TestAdminShutdownDeadline(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	a := newAdminServer("127.0.0.1:0", adminHandlers{Metrics: slow}, zap.NewNop())
	addr, err := a.Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer close(release)
	clientDone := make(chan error, 1)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get("http://" + addr.String() + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		clientDone <- err
	}()
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := a.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want deadline exceeded", err)
	}
	<-clientDone
}

func TestAdminShutdownBeforeStart(t *testing.T) {
	a := newAdminServer("127.0.0.1:0", adminHandlers{}, zap.NewNop())
	if err := a.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown before Start: %v", err)
	}
}

func TestAdminStartError(t *testing.T) {
	a := newAdminServer("256.0.0.1:0", adminHandlers{}, zap.NewNop())
	if _, err := a.Start(); err == nil {
		t.Error("Start on an invalid address succeeded")
	}
}
