package ssetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/sse"
	"go.uber.org/goleak"
)

// Every handler goroutine must be gone once Server.Close returns, and every
// client connection once its test's transport is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every test: the slowest thing waited for is a
// heartbeat of a few tens of milliseconds or a loopback round trip.
const testTimeout = 10 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func newServer(t *testing.T, opts Options) *Server {
	s := NewServer(opts)
	t.Cleanup(s.Close)
	return s
}

// newClient returns a client whose connections the test closes.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// result is one Next of a client stream.
type result struct {
	item sse.Item
	err  error
}

// client is one real EventSource-like request: net/http GET, the body read
// by sse.Reader in a goroutine that the test's cleanup waits for.
type client struct {
	resp *http.Response
	r    *sse.Reader
	ch   chan result
}

type header map[string]string

func get(t *testing.T, ctx context.Context, c *http.Client, url string, h header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	return resp
}

// connect opens a stream and starts reading it.
func connect(t *testing.T, ctx context.Context, c *http.Client, url string, h header) *client {
	t.Helper()
	resp := get(t, ctx, c, url, h)
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	cl := &client{resp: resp, r: sse.NewReader(resp.Body, sse.Options{LastEventID: h["Last-Event-ID"]}), ch: make(chan result)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(cl.ch)
		for {
			it, err := cl.r.Next()
			select {
			case cl.ch <- result{it, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = resp.Body.Close() // unblocks Next
		wg.Wait()
	})
	return cl
}

// next returns the next item, failing the test on an error or timeout.
func (cl *client) next(t *testing.T, ctx context.Context) sse.Item {
	t.Helper()
	select {
	case res, ok := <-cl.ch:
		if !ok || res.err != nil {
			t.Fatalf("stream ended: %v", res.err)
		}
		return res.item
	case <-ctx.Done():
		t.Fatal("timed out waiting for an item")
	}
	return sse.Item{}
}

// end returns the error that ends the stream, skipping items before it.
func (cl *client) end(t *testing.T, ctx context.Context) error {
	t.Helper()
	_, err := cl.rest(t, ctx)
	return err
}

// rest returns the items left on the stream and the error that ends it.
func (cl *client) rest(t *testing.T, ctx context.Context) ([]sse.Item, error) {
	t.Helper()
	var items []sse.Item
	for {
		select {
		case res, ok := <-cl.ch:
			if !ok {
				t.Fatal("stream reader gone")
			}
			if res.err != nil {
				return items, res.err
			}
			items = append(items, res.item)
		case <-ctx.Done():
			t.Fatal("timed out waiting for the stream to end")
		}
	}
}

// silent checks that nothing arrives for d.
func (cl *client) silent(t *testing.T, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case res := <-cl.ch:
		t.Fatalf("got %+v, %v during silence", res.item, res.err)
	case <-timer.C:
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) }
