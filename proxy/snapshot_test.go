package proxy_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/gapfill"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/template"
	"github.com/tetherproxy/tether/proxy"
)

// TETHER_RESYNC_URL against a scripted Binance spot depth feed that loses
// events across a reconnect and does not replay them, and an HTTP endpoint
// serving the order book snapshot as Binance's GET /api/v3/depth does.

// depthSnapshot is Binance's answer to GET /api/v3/depth: the book as of
// update id lastUpdateId.
func depthSnapshot(last int64) string {
	return fmt.Sprintf(`{"lastUpdateId":%d,"bids":[["0.0024","14.7"]],"asks":[["0.0026","3.6"]]}`, last)
}

// depthEndpoint serves the snapshot of symbol BNBBTC with answer, to
// clients sending the feed's key, and counts the requests.
type depthEndpoint struct {
	srv    *httptest.Server
	answer func(w http.ResponseWriter, r *http.Request)

	mu       sync.Mutex
	requests []string // queries, in order
	badKeys  int
}

func newDepthEndpoint(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *depthEndpoint {
	t.Helper()
	d := &depthEndpoint{answer: answer}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *depthEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.requests = append(d.requests, r.URL.RequestURI())
	bad := r.Header.Get("X-Feed-Key") != feedKey
	if bad {
		d.badKeys++
	}
	d.mu.Unlock()
	if bad {
		http.Error(w, "no key", http.StatusUnauthorized)
		return
	}
	d.answer(w, r)
}

func (d *depthEndpoint) seen() ([]string, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.requests...), d.badKeys
}

func mustResyncURL(t *testing.T, text string) template.ResyncURL {
	t.Helper()
	var u template.ResyncURL
	if err := u.UnmarshalText([]byte(text)); err != nil {
		t.Fatalf("resync url %q: %v", text, err)
	}
	return u
}

// snapshotGapTimeout is TETHER_GAP_TIMEOUT here: what a snapshot has to
// arrive.
const snapshotGapTimeout = 500 * time.Millisecond

// snapshotEnv is tether in front of a Binance-style depth feed with
// TETHER_RESYNC_URL on d, under the notify policy, logging to logs.
type snapshotEnv struct {
	up   *upstreamEnv
	env  *tetherEnv
	a    *app
	logs *observer.ObservedLogs
}

func newSnapshotEnv(t *testing.T, d *depthEndpoint, client *gapfill.Client) *snapshotEnv {
	t.Helper()
	up := newUpstream(t, upstreamConfig{})
	core, logs := observer.New(zapcore.InfoLevel)
	header := http.Header{"X-Feed-Key": {feedKey}}
	if client == nil {
		client = newGapFill(t, header, snapshotGapTimeout)
	}
	env := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Logger = zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel)).Core()))
		o.Upstream.Header = header
		o.Rules.SeqPath = mustPath(t, "u")
		o.Rules.SeqFirstPath = mustPath(t, "U")
		o.Rules.StreamPath = mustPath(t, "s")
		o.Rules.ResyncSeqPath = mustPath(t, "lastUpdateId")
		o.Sequences = proxy.Sequences{
			SeqModel:   buffer.ModelRange,
			ResyncURL:  mustResyncURL(t, d.srv.URL+"/api/v3/depth?symbol={{query .Stream}}&limit=1000"),
			GapFill:    client,
			GapTimeout: snapshotGapTimeout,
			GapPolicy:  proxy.GapNotify,
			GapNotice:  mustGapNotice(t, feedNotice),
		}
	})
	return &snapshotEnv{up: up, env: env, a: dialApp(t, env.url, appOptions{}), logs: logs}
}

// firstConnection plays the depth events 1..9 on the first connection,
// then resets it: the updates published until the next one connects
// (10..13) are lost to tether.
func (e *snapshotEnv) firstConnection(t *testing.T) {
	t.Helper()
	c := e.up.nextConn(t)
	for _, ev := range []string{binanceSpot(1, 3), binanceSpot(4, 4), binanceSpot(5, 9)} {
		if err := c.Send(ev); err != nil {
			t.Fatalf("send %s: %v", ev, err)
		}
		e.a.expectText(t, ev)
	}
	_ = c.Reset()
}

func (e *snapshotEnv) send(t *testing.T, c interface{ Send(string) error }, events ...string) {
	t.Helper()
	for _, ev := range events {
		if err := c.Send(ev); err != nil {
			t.Fatalf("send %s: %v", ev, err)
		}
	}
}

// expectSession checks the session's gap outcomes, recoveries and
// duplicates. Call it once the app got a message the upstream reader
// delivered after everything counted: the counts of a turn are taken
// before the next turn starts.
func (e *snapshotEnv) expectSession(t *testing.T, gaps, recoveries map[string]uint64, dups uint64) {
	t.Helper()
	st := e.env.srv.Status()
	if len(st.Sessions) != 1 {
		t.Fatalf("%d sessions, want 1", len(st.Sessions))
	}
	s := st.Sessions[0]
	if !maps.Equal(s.Gaps, gaps) || !maps.Equal(s.Recoveries, recoveries) || s.Duplicates != dups {
		t.Fatalf("gaps %v, recoveries %v, duplicates %d; want %v, %v, %d", s.Gaps, s.Recoveries, s.Duplicates, gaps, recoveries, dups)
	}
}

// The gap across the reconnect cannot be filled by anything else, so the
// snapshot is fetched at once, with the upstream's credentials: the app
// gets it once, then the first event after it (U <= N+1 <= u) and the rest
// in order; the events it covers, held or live, are dropped and counted as
// duplicates.
func TestSnapshotResetsBinanceDepthAfterAReconnect(t *testing.T) {
	asked := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once // a second request is a failure seen below, not a panic
	d := newDepthEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(asked) })
		<-release // the feed goes on meanwhile
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, depthSnapshot(16))
	})
	e := newSnapshotEnv(t, d, nil)
	e.firstConnection(t)

	c := e.up.nextConn(t)
	e.send(t, c, binanceSpot(14, 15))
	select {
	case <-asked:
	case <-time.After(testTimeout):
		t.Fatalf("no snapshot asked for within %v of the gap", testTimeout)
	}
	e.send(t, c, binanceSpot(16, 16), binanceSpot(17, 18)) // covered, then the first after it
	close(release)
	e.a.expectText(t, depthSnapshot(16))
	e.a.expectText(t, binanceSpot(17, 18))
	e.send(t, c, binanceSpot(19, 20))
	e.a.expectText(t, binanceSpot(19, 20))

	e.expectSession(t, map[string]uint64{labels.GapResync: 1}, map[string]uint64{labels.RecoveryResync: 1}, 2)
	requests, badKeys := d.seen()
	if want := []string{"/api/v3/depth?symbol=BNBBTC&limit=1000"}; !slicesEqual(requests, want) || badKeys != 0 {
		t.Fatalf("snapshot requests %q (%d without the key), want %q", requests, badKeys, want)
	}
	if n := e.logs.FilterMessage("snapshot failed").Len(); n != 0 {
		t.Fatalf("%d snapshot failed lines", n)
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n") && len(a) == len(b)
}

// A snapshot that cannot be had is logged with what went wrong and
// counted, and the gap goes to the policy: the app gets the notice, then
// the events that were held, in order.
func TestSnapshotFailureGoesToThePolicy(t *testing.T) {
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		client func(t *testing.T) *gapfill.Client
		err    string // in the "snapshot failed" line's error, which is never empty
		status int    // its http_status, 0 for none
		hangs  bool   // the answer never comes: the failure waits for TETHER_GAP_TIMEOUT
	}{
		{name: "500", answer: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "busy", http.StatusInternalServerError)
		}, err: "gapfill: HTTP 500 Internal Server Error", status: 500},
		{name: "timeout", answer: func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, err: "gapfill: ", hangs: true}, // cancelled at the deadline, or timed out by the request bound: both name the request
		{name: "no number", answer: func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"bids":[],"asks":[]}`)
		}, err: `snapshot has no integer at TETHER_RESYNC_SEQ_PATH "lastUpdateId"`},
		{name: "not JSON", answer: func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `<html>maintenance</html>`)
		}, err: "gapfill: JSON document (byte 1): invalid character '<'"},
		{name: "over the size limit", answer: func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, depthSnapshot(16))
		}, client: func(t *testing.T) *gapfill.Client {
			c := gapfill.NewClient(gapfill.Options{Header: http.Header{"X-Feed-Key": {feedKey}}, Timeout: snapshotGapTimeout, MaxBytes: 32})
			t.Cleanup(c.Close)
			return c
		}, err: "gapfill: answer exceeds the limit of 32 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var client *gapfill.Client
			if tt.client != nil {
				client = tt.client(t)
			}
			e := newSnapshotEnv(t, newDepthEndpoint(t, tt.answer), client)
			e.firstConnection(t)
			c := e.up.nextConn(t)
			sent := time.Now()
			e.send(t, c, binanceSpot(14, 15), binanceSpot(16, 16), binanceSpot(17, 18))
			e.a.expectText(t, feedGap("BNBBTC", 10, 13, ""))
			if waited := time.Since(sent); tt.hangs && waited < snapshotGapTimeout {
				t.Fatalf("policy applied %v after the gap, before the snapshot's TETHER_GAP_TIMEOUT (%v)", waited, snapshotGapTimeout)
			}
			e.a.expectText(t, binanceSpot(14, 15))
			e.a.expectText(t, binanceSpot(16, 16))
			e.a.expectText(t, binanceSpot(17, 18))
			e.send(t, c, binanceSpot(19, 20))
			e.a.expectText(t, binanceSpot(19, 20))

			e.expectSession(t, map[string]uint64{labels.GapResyncFailed: 1, labels.GapNotified: 1}, map[string]uint64{}, 0)
			failed := e.logs.FilterMessage("snapshot failed").All()
			if len(failed) != 1 {
				t.Fatalf("%d snapshot failed lines, want 1", len(failed))
			}
			fields := failed[0].ContextMap()
			if msg, _ := fields["error"].(string); msg == "" || !strings.Contains(msg, tt.err) {
				t.Fatalf("snapshot failed error %q, want one containing %q", msg, tt.err)
			}
			if status, _ := fields["http_status"].(int64); status != int64(tt.status) {
				t.Fatalf("snapshot failed http_status %v, want %d", fields["http_status"], tt.status)
			}
			if strings.Contains(fmt.Sprint(fields), "api/v3") {
				t.Fatalf("the snapshot URL is logged: %v", fields)
			}
			given := e.logs.FilterMessage("gap given up, app notified").All()
			if len(given) != 1 || given[0].ContextMap()["reason"] != "no snapshot from TETHER_RESYNC_URL" {
				t.Fatalf("gap given up lines: %v", given)
			}
		})
	}
}
