package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// docs/design.md's resume-protocol example loads, and reaches the proxy as set.
func TestSequenceConfigDesignExample(t *testing.T) {
	env := configtest.WithURL(map[string]string{
		"TETHER_SESSION_MATCH":   `{"t":"welcome"}`,
		"TETHER_SESSION_PATH":    "session",
		"TETHER_RESUME_MESSAGE":  `{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`,
		"TETHER_SEQ_PATH":        "seq",
		"TETHER_RESYNC_MATCH":    `{"t":"welcome","resync":true}`,
		"TETHER_RESYNC_SEQ_PATH": "seq",
		"TETHER_GAPFILL_URL":     "https://feed.example.com/v1/catchup?from={{.From}}&to={{.To}}",
		"TETHER_GAP_TIMEOUT":     "2s",
		"TETHER_GAP_POLICY":      "notify",
		"TETHER_GAP_NOTICE":      `{"t":"gap","from":{{.From}},"to":{{.To}}}`,
		"TETHER_HOLD_MAX_BYTES":  "1MiB",
	})
	cfg, err := config.Load(env)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	opts, err := proxyOptions(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	r, s := opts.Rules, opts.Sequences
	t.Cleanup(s.GapFill.Close)
	for name, got := range map[string]string{
		"TETHER_SESSION_MATCH":   r.SessionMatch.String(),
		"TETHER_SESSION_PATH":    r.SessionPath.String(),
		"TETHER_RESUME_MESSAGE":  s.ResumeMessage.String(),
		"TETHER_SEQ_PATH":        r.SeqPath.String(),
		"TETHER_RESYNC_MATCH":    r.ResyncMatch.String(),
		"TETHER_RESYNC_SEQ_PATH": r.ResyncSeqPath.String(),
		"TETHER_GAPFILL_URL":     s.GapFillURL.String(),
		"TETHER_GAP_TIMEOUT":     s.GapTimeout.String(),
		"TETHER_GAP_POLICY":      s.GapPolicy.String(),
		"TETHER_GAP_NOTICE":      s.GapNotice.String(),
	} {
		if got != env[name] {
			t.Errorf("%s reached the proxy as %q, want %q", name, got, env[name])
		}
	}
	if s.HoldMaxBytes != 1<<20 || s.GapFill == nil {
		t.Errorf("hold %d bytes, catch-up client %v: want 1MiB and a client", s.HoldMaxBytes, s.GapFill)
	}
}

func TestSequenceConfigDefaults(t *testing.T) {
	cfg, err := config.Load(configtest.WithURL(nil))
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	if cfg.GapTimeout != 5*time.Second || cfg.GapPolicy != proxy.GapClose || cfg.HoldMaxBytes != 8*config.MiB {
		t.Errorf("defaults: gap timeout %v, policy %v, hold %v; want 5s, close, 8MiB", cfg.GapTimeout, cfg.GapPolicy, cfg.HoldMaxBytes)
	}
	r, s := messageRules(cfg), sequencePolicy(cfg, proxyUpstream(t, cfg))
	if r.SeqPath.String() != "" || s.GapFill != nil || s.ResumeMessage.IsSet() {
		t.Errorf("sequencing on by default: %+v", s)
	}
}

func proxyUpstream(t *testing.T, cfg config.Config) upstream.Options {
	t.Helper()
	opts, err := proxyOptions(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return opts.Upstream
}

// Every gap outcome and recovery method the sequencing reports
// (internal/labels) is a series internal/metrics pre-creates at zero.
func TestSequenceLabelsMatchMetrics(t *testing.T) {
	up := scriptedUpstream(t)
	r := startProxy(t, map[string]string{"TETHER_UPSTREAM_URL": up.URL()})
	m := scrape(t, r.adminURL)
	for _, outcome := range []string{labels.GapFilled, labels.GapResync, labels.GapClosed, labels.GapSkipped,
		labels.GapNotified, labels.GapEpoch, labels.GapRestart} {
		if _, ok := sample(m, "tether_gaps_total", map[string]string{"outcome": outcome}); !ok {
			t.Errorf("gap outcome %q is not pre-created by internal/metrics", outcome)
		}
	}
	for _, method := range []string{labels.RecoveryResume, labels.RecoveryHTTP, labels.RecoveryResync} {
		if _, ok := sample(m, "tether_recoveries_total", map[string]string{"method": method}); !ok {
			t.Errorf("recovery method %q is not pre-created by internal/metrics", method)
		}
	}
}

// A gap filled over HTTP shows in /metrics: tether_gaps_total{outcome="filled"},
// tether_recoveries_total{method="http"}, the duplicate dropped on the way,
// and tether_held_bytes back at 0. The catch-up request carries the
// upstream's credentials: its static header and the bearer token of its
// token file.
func TestMetricsGapFilledOverHTTP(t *testing.T) {
	events := func(seqs ...int) []string {
		var out []string
		for _, s := range seqs {
			out = append(out, fmt.Sprintf(`{"t":"event","seq":%d}`, s))
		}
		return out
	}
	up := newTestUpstream(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
		for _, m := range events(1, 2, 2, 4, 5) {
			if c.Send(m) != nil {
				return
			}
		}
		<-c.Done()
	}})
	var mu sync.Mutex
	var creds []string
	catchUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		creds = append(creds, r.Header.Get("X-Api-Key")+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = fmt.Fprintln(w, events(3)[0])
	}))
	t.Cleanup(catchUp.Close)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("tok-9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":        up.URL(),
		"TETHER_UPSTREAM_HEADERS":    "X-Api-Key: key-1",
		"TETHER_UPSTREAM_TOKEN_FILE": token,
		"TETHER_SEQ_PATH":            "seq",
		"TETHER_GAPFILL_URL":         catchUp.URL + "/catchup?from={{.From}}&to={{.To}}",
	})
	app := dialTestApp(t, r.appURL)
	for _, m := range events(1, 2, 3, 4, 5) {
		app.expect(t, m)
	}
	// The sequencer counts a fill's outcome, then its recovery, one
	// counter after the other with no lock held: a scrape may fall between
	// them. Each count is awaited; the one that must stay 0 is read last.
	awaitMetric(t, r.adminURL, "tether_gaps_total", map[string]string{"outcome": "filled"}, 1)
	awaitMetric(t, r.adminURL, "tether_recoveries_total", map[string]string{"method": "http"}, 1)
	awaitMetric(t, r.adminURL, "tether_duplicates_dropped_total", nil, 1)
	m := awaitMetric(t, r.adminURL, "tether_held_bytes", nil, 0)
	if got := value(m, "tether_gaps_total", map[string]string{"outcome": "closed"}); got != 0 {
		t.Errorf("tether_gaps_total{outcome=closed} = %v, want 0", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(creds, []string{"key-1 Bearer tok-9"}) {
		t.Errorf("catch-up requests carried %q, want the upstream's header and token once", creds)
	}
}
