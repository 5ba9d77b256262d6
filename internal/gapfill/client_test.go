package gapfill

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slack is added to bounds derived from the configuration, for a loaded
// machine running the race detector.
const slack = 2 * time.Second

func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	c := NewClient(opts)
	t.Cleanup(c.Close)
	return c
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func noBackoff(int) time.Duration { return time.Millisecond }

func TestFetchAnswers(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        []string
	}{
		{"JSON array", 200, "application/json", `[{"seq":5},{"seq":6}]`, []string{`{"seq":5}`, `{"seq":6}`}},
		{"NDJSON", 200, "application/x-ndjson", "{\"seq\":5}\n{\"seq\":6}\n", []string{`{"seq":5}`, `{"seq":6}`}},
		{"CRLF NDJSON without a type", 200, "", "{\"seq\":5}\r\n{\"seq\":6}\r\n", []string{`{"seq":5}`, `{"seq":6}`}},
		{"partial answer", 200, "application/json", `[{"seq":5}]`, []string{`{"seq":5}`}},
		{"empty 200", 200, "application/json", "", nil},
		{"204 No Content", 204, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			})
			got, err := newClient(t, Options{}).Fetch(testContext(t), srv.URL+"/gap?from=5&to=6")
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if strings.Join(asStrings(got), "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("Fetch = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFetchStatusErrors(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter string
		want       StatusError
		msg        string
		transient  bool
	}{
		{404, "", StatusError{Status: 404}, "gapfill: HTTP 404 Not Found", false},
		{410, "", StatusError{Status: 410}, "gapfill: HTTP 410 Gone", false},
		{401, "", StatusError{Status: 401}, "gapfill: HTTP 401 Unauthorized", false},
		{500, "", StatusError{Status: 500}, "gapfill: HTTP 500 Internal Server Error", true},
		{429, "7", StatusError{Status: 429, RetryAfter: 7 * time.Second}, "gapfill: HTTP 429 Too Many Requests (retry after 7s)", true},
		{503, "Wed, 01 Jan 2031 00:01:00 GMT", StatusError{Status: 503, RetryAfter: time.Minute}, "gapfill: HTTP 503 Service Unavailable (retry after 1m0s)", true},
		{408, "soon", StatusError{Status: 408}, "gapfill: HTTP 408 Request Timeout", true},
	}
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				http.Error(w, "no such stream", tt.status)
			})
			_, err := newClient(t, Options{now: func() time.Time { return now }}).Fetch(testContext(t), srv.URL)
			var se *StatusError
			if !errors.As(err, &se) || *se != tt.want {
				t.Fatalf("Fetch error %v (%#v), want %+v", err, se, tt.want)
			}
			if err.Error() != tt.msg {
				t.Errorf("message %q, want %q", err, tt.msg)
			}
			if Transient(err) != tt.transient {
				t.Errorf("Transient = %v, want %v", Transient(err), tt.transient)
			}
		})
	}
}

func TestFetchRetryRecoversFrom500(t *testing.T) {
	var calls atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "busy", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, `[{"seq":1}]`)
	})
	var attempts []int
	backoff := func(n int) time.Duration {
		attempts = append(attempts, n)
		return time.Millisecond
	}
	got, err := newClient(t, Options{}).FetchRetry(testContext(t), srv.URL, backoff)
	if err != nil || len(got) != 1 {
		t.Fatalf("FetchRetry = %q, %v", got, err)
	}
	if calls.Load() != 2 || fmt.Sprint(attempts) != "[1]" {
		t.Fatalf("%d requests, backoff called with %v; want 2 and [1]", calls.Load(), attempts)
	}
}

func TestFetchRetryDoesNotRetryFinalErrors(t *testing.T) {
	tests := []struct {
		name string
		h    http.HandlerFunc
	}{
		{"404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }},
		{"garbage", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>oops</html>") }},
		{"oversized", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, strings.Repeat(" ", 200)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				tt.h(w, r)
			})
			_, err := newClient(t, Options{MaxBytes: 100}).FetchRetry(testContext(t), srv.URL, noBackoff)
			if err == nil || Transient(err) {
				t.Fatalf("FetchRetry error %v, want a final one", err)
			}
			if calls.Load() != 1 {
				t.Fatalf("%d requests for a final error, want 1", calls.Load())
			}
		})
	}
}

func TestFetchRetryHonoursRetryAfter(t *testing.T) {
	const retryAfter = time.Second
	var calls atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, `[]`)
	})
	start := time.Now()
	_, err := newClient(t, Options{}).FetchRetry(testContext(t), srv.URL, noBackoff)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < retryAfter || d > retryAfter+slack {
		t.Fatalf("retried after %s, want about the server's Retry-After of %s", d, retryAfter)
	}
}

func TestFetchRetryGivesUpWhenTheWaitOutlastsTheDeadline(t *testing.T) {
	const deadline = 3 * time.Second
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := newClient(t, Options{}).FetchRetry(ctx, srv.URL, noBackoff)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 503 || !strings.HasPrefix(err.Error(), "gave up after 1 attempts: ") {
		t.Fatalf("FetchRetry error %v, want the 503 after one attempt", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("gave up after %s, only when the deadline passed: it should not wait for a Retry-After beyond it", time.Since(start))
	}
}

func TestFetchRetryNetworkErrorsUntilTheDeadline(t *testing.T) {
	const deadline = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var attempts atomic.Int32
	backoff := func(n int) time.Duration {
		attempts.Store(int32(n))
		return 10 * time.Millisecond
	}
	start := time.Now()
	_, err = newClient(t, Options{}).FetchRetry(ctx, "http://"+addr+"/gap", backoff)
	if err == nil || !strings.Contains(err.Error(), "gapfill: GET: dial tcp") || !strings.Contains(err.Error(), "gave up after") {
		t.Fatalf("FetchRetry error %v", err)
	}
	if attempts.Load() < 2 {
		t.Fatalf("only %d retries within %s", attempts.Load(), deadline)
	}
	if d := time.Since(start); d > deadline+slack {
		t.Fatalf("returned after %s, deadline was %s", d, deadline)
	}
}

func TestFetchRetryStopsWhenCancelledDuringTheWait(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	backoff := func(int) time.Duration {
		cancel() // the session closed while the retry was pending
		return time.Hour
	}
	_, err := newClient(t, Options{}).FetchRetry(ctx, srv.URL, backoff)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 502 {
		t.Fatalf("FetchRetry error %v, want the 502 it was waiting to retry", err)
	}
}

func TestFetchTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	tests := []struct {
		name string
		h    http.HandlerFunc
	}{
		{"no answer", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}},
		{"body stalls", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			fmt.Fprint(w, "{\"seq\":1}\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.h)
			start := time.Now()
			_, err := newClient(t, Options{Timeout: timeout}).Fetch(testContext(t), srv.URL)
			d := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "no complete answer within 200ms") {
				t.Fatalf("Fetch error %v", err)
			}
			if !Transient(err) {
				t.Error("an attempt's timeout is not transient")
			}
			if d < timeout || d > timeout+slack {
				t.Fatalf("timed out after %s, want %s", d, timeout)
			}
		})
	}
}

func TestFetchSizeLimit(t *testing.T) {
	const limit = 100
	body := func(n int) string { return "[" + strings.Repeat(" ", n-2) + "]" }
	tests := []struct {
		name    string
		n       int
		chunked bool
		tooBig  bool
	}{
		{"declared length over the limit", limit + 1, false, true},
		{"chunked body over the limit", limit + 1, true, true},
		{"exactly the limit", limit, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.chunked {
					w.(http.Flusher).Flush() // headers out before the length is known
				}
				fmt.Fprint(w, body(tt.n))
			})
			_, err := newClient(t, Options{MaxBytes: limit}).Fetch(testContext(t), srv.URL)
			var tl *TooLargeError
			if tt.tooBig != errors.As(err, &tl) {
				t.Fatalf("Fetch of %d bytes: %v", tt.n, err)
			}
			if tt.tooBig && err.Error() != "gapfill: answer exceeds the limit of 100 bytes" {
				t.Fatalf("message %q", err)
			}
		})
	}
}

func TestFetchGarbageSaysWhere(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprint(w, "{\"seq\":1}\n{\"seq\":2}\nnot json\n")
	})
	_, err := newClient(t, Options{}).Fetch(testContext(t), srv.URL)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 3 {
		t.Fatalf("Fetch error %v, want a ParseError on line 3", err)
	}
}

func TestFetchCredentials(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	writeToken := func(s string) {
		// Rotated the way a Kubernetes projected volume does: a new file
		// renamed over the old one.
		tmp := filepath.Join(dir, "token.new")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, tokenFile); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var seen []http.Header
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		fmt.Fprint(w, "[]")
	})
	c := newClient(t, Options{
		Header:    http.Header{"X-Tenant": {"t1"}, "Authorization": {"Basic c3RhbGU="}},
		TokenFile: tokenFile,
	})
	for _, token := range []string{"one\n", "  two  \n"} {
		writeToken(token)
		if _, err := c.Fetch(testContext(t), srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, want := range []string{"Bearer one", "Bearer two"} {
		h := seen[i]
		if h.Get("Authorization") != want || h.Get("X-Tenant") != "t1" || !strings.Contains(h.Get("Accept"), "application/x-ndjson") {
			t.Errorf("request %d headers %v, want Authorization %q, X-Tenant t1 and an Accept", i+1, h, want)
		}
	}
}

func TestFetchTokenFileProblems(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer late" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `[1]`)
	})
	c := newClient(t, Options{TokenFile: tokenFile})

	_, err := c.Fetch(testContext(t), srv.URL)
	if !errors.Is(err, os.ErrNotExist) || !Transient(err) {
		t.Fatalf("missing token file: %v (transient %v)", err, Transient(err))
	}
	if err := os.WriteFile(tokenFile, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(testContext(t), srv.URL); !errors.Is(err, ErrEmptyToken) {
		t.Fatalf("empty token file: %v", err)
	}
	// The token appears while FetchRetry waits: the next attempt uses it.
	backoff := func(int) time.Duration {
		if err := os.WriteFile(tokenFile, []byte("late"), 0o600); err != nil {
			t.Error(err)
		}
		return time.Millisecond
	}
	if got, err := c.FetchRetry(testContext(t), srv.URL, backoff); err != nil || len(got) != 1 {
		t.Fatalf("FetchRetry once the token appears: %q, %v", got, err)
	}
}

func TestFetchErrorsDoNotQuoteTheURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, Options{})
	for _, u := range []string{
		"http://user:hunter2@" + addr + "/gap?token=hunter2",
		"http://[::1/gap?token=hunter2",
		"ftp://" + addr + "/gap?token=hunter2",
	} {
		_, err := c.Fetch(testContext(t), u)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Fetch(%s) error %v quotes the secret", u, err)
		}
	}
	_, err = c.Fetch(testContext(t), "http://[::1/gap")
	if Transient(err) {
		t.Errorf("a URL that does not parse is transient: %v", err)
	}
}

func TestFetchTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"seq":1}]`)
	}))
	// The refused handshake below is expected: keep it out of the output.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())

	got, err := newClient(t, Options{TLS: &tls.Config{RootCAs: pool}}).Fetch(testContext(t), srv.URL)
	if err != nil || len(got) != 1 {
		t.Fatalf("Fetch with the server's CA: %q, %v", got, err)
	}
	var calls atomic.Int32
	backoff := func(int) time.Duration { calls.Add(1); return time.Millisecond }
	_, err = newClient(t, Options{}).FetchRetry(testContext(t), srv.URL, backoff)
	if err == nil || Transient(err) || calls.Load() != 0 {
		t.Fatalf("untrusted certificate: %v (transient %v, %d retries)", err, Transient(err), calls.Load())
	}
}

func TestFetchConcurrent(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `[{"from":%q}]`, r.URL.Query().Get("from"))
	})
	c := newClient(t, Options{})
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			got, err := c.Fetch(ctx, fmt.Sprintf("%s/?from=%d", srv.URL, i))
			if want := fmt.Sprintf(`{"from":"%d"}`, i); err != nil || len(got) != 1 || string(got[0]) != want {
				errs <- fmt.Errorf("fetch %d: %q, %v", i, got, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"", 0, false},
		{"Wed, 01 Jan 2031 00:00:30 GMT", 30 * time.Second, true},
		{"Tue, 31 Dec 2030 23:00:00 GMT", 0, true}, // in the past: retry now
		{"99999999999999", 24 * time.Hour, true},
		{"Fri, 01 Jan 2100 00:00:00 GMT", 24 * time.Hour, true},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.v, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestNewClientRejectsNegativeOptions(t *testing.T) {
	for _, o := range []Options{{MaxBytes: -1}, {Timeout: -time.Second}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewClient(%+v) did not panic", o)
				}
			}()
			NewClient(o)
		}()
	}
}
