package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/metrics"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// DESIGN.md's resume-protocol example loads, and reaches the proxy as set.
func TestSequenceConfigDesignExample(t *testing.T) {
	env := withURL(map[string]string{
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
	cfg, err := LoadConfig(env)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	opts, err := proxyOptions(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	s := opts.Rules.Sequences
	t.Cleanup(s.GapFill.Close)
	for name, got := range map[string]string{
		"TETHER_SESSION_MATCH":   s.SessionMatch.String(),
		"TETHER_SESSION_PATH":    s.SessionPath.String(),
		"TETHER_RESUME_MESSAGE":  s.ResumeMessage.String(),
		"TETHER_SEQ_PATH":        s.SeqPath.String(),
		"TETHER_RESYNC_MATCH":    s.ResyncMatch.String(),
		"TETHER_RESYNC_SEQ_PATH": s.ResyncSeqPath.String(),
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
	cfg, err := LoadConfig(withURL(nil))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if cfg.GapTimeout != 5*time.Second || cfg.GapPolicy != proxy.GapClose || cfg.HoldMaxBytes != 8*MiB {
		t.Errorf("defaults: gap timeout %v, policy %v, hold %v; want 5s, close, 8MiB", cfg.GapTimeout, cfg.GapPolicy, cfg.HoldMaxBytes)
	}
	s := sequenceRules(cfg, proxyUpstream(t, cfg))
	if s.SeqPath.String() != "" || s.GapFill != nil || s.ResumeMessage.IsSet() {
		t.Errorf("sequencing on by default: %+v", s)
	}
}

func proxyUpstream(t *testing.T, cfg Config) upstream.Options {
	t.Helper()
	opts, err := proxyOptions(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return opts.Upstream
}

// Settings that could never take effect, or contradict each other, are
// refused with a message naming what to add or drop.
func TestSequenceConfigValidation(t *testing.T) {
	const (
		resume = `{"t":"resume","after":{{.LastSeq}}}`
		url    = "http://127.0.0.1:1/c?from={{.From}}"
		notice = `{"gap":{{.From}}}`
	)
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TETHER_SESSION_MATCH": `{"t":"welcome"}`, "TETHER_RESUME_MESSAGE": resume, "TETHER_SEQ_PATH": "seq"},
			"TETHER_SESSION_MATCH: needs TETHER_SESSION_PATH"},
		{map[string]string{"TETHER_SESSION_PATH": "session"}, "TETHER_SESSION_PATH: needs TETHER_SESSION_MATCH"},
		{map[string]string{"TETHER_SESSION_MATCH": `{"t":"welcome"}`, "TETHER_SESSION_PATH": "session"},
			"TETHER_SESSION_MATCH: needs TETHER_RESUME_MESSAGE or TETHER_GAPFILL_URL"},
		{map[string]string{"TETHER_RESUME_MESSAGE": resume}, "TETHER_RESUME_MESSAGE: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_STREAM_PATH": "channel"}, "TETHER_STREAM_PATH: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_RESYNC_MATCH": `{"t":"snapshot"}`, "TETHER_SEQ_PATH": "seq"},
			"TETHER_RESYNC_MATCH: needs TETHER_RESYNC_SEQ_PATH"},
		{map[string]string{"TETHER_RESYNC_MATCH": `{"t":"snapshot"}`, "TETHER_RESYNC_SEQ_PATH": "seq"},
			"TETHER_RESYNC_MATCH: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_RESYNC_SEQ_PATH": "seq", "TETHER_SEQ_PATH": "seq"},
			"TETHER_RESYNC_SEQ_PATH: needs TETHER_RESYNC_MATCH"},
		{map[string]string{"TETHER_GAPFILL_URL": url}, "TETHER_GAPFILL_URL: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_SEQ_PATH": "seq", "TETHER_GAP_POLICY": "notify"},
			"TETHER_GAP_NOTICE: required when TETHER_GAP_POLICY=notify"},
		{map[string]string{"TETHER_SEQ_PATH": "seq", "TETHER_GAP_NOTICE": notice},
			`TETHER_GAP_NOTICE: only sent with TETHER_GAP_POLICY=notify, got "close"`},
		{map[string]string{"TETHER_GAP_POLICY": "drop"}, `TETHER_GAP_POLICY: unknown gap policy "drop"`},
		{map[string]string{"TETHER_GAP_TIMEOUT": "0s"}, `TETHER_GAP_TIMEOUT: must be > 0, got "0s"`},
		{map[string]string{"TETHER_HOLD_MAX_BYTES": "0"}, `TETHER_HOLD_MAX_BYTES: must be > 0`},
		{map[string]string{"TETHER_RESUME_MESSAGE": `{"after":{{.LastSeqq}}}`, "TETHER_SEQ_PATH": "seq"},
			"TETHER_RESUME_MESSAGE: "},
		{map[string]string{"TETHER_GAPFILL_URL": "wss://h/{{.From}}", "TETHER_SEQ_PATH": "seq"},
			`TETHER_GAPFILL_URL: rendered URL has scheme "wss": want http or https`},
		{map[string]string{"TETHER_SEQ_PATH": "a..b"}, "TETHER_SEQ_PATH: path has an empty component"},
	}
	for _, tc := range tests {
		lines := loadErrLines(t, withURL(tc.env))
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, tc.want) }) {
			t.Errorf("env %v: problems %q, want one containing %q", tc.env, lines, tc.want)
		}
	}
}

// The proxy's gap outcomes and recovery methods are the label values
// internal/metrics documents and pre-creates.
func TestSequenceLabelsMatchMetrics(t *testing.T) {
	pairs := [][2]string{
		{proxy.GapFilled, metrics.GapFilled}, {proxy.GapResync, metrics.GapResync},
		{proxy.GapClosed, metrics.GapClosed}, {proxy.GapSkipped, metrics.GapSkipped},
		{proxy.GapNotified, metrics.GapNotified},
		{proxy.RecoveryResume, metrics.RecoveryResume}, {proxy.RecoveryHTTP, metrics.RecoveryHTTP},
		{proxy.RecoveryResync, metrics.RecoveryResync},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("proxy says %q, internal/metrics %q", p[0], p[1])
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
	m := awaitMetric(t, r.adminURL, "tether_gaps_total", map[string]string{"outcome": "filled"}, 1)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"tether_recoveries_total", map[string]string{"method": "http"}, 1},
		{"tether_duplicates_dropped_total", nil, 1},
		{"tether_held_bytes", nil, 0},
		{"tether_gaps_total", map[string]string{"outcome": "closed"}, 0},
	} {
		if got := value(m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(creds, []string{"key-1 Bearer tok-9"}) {
		t.Errorf("catch-up requests carried %q, want the upstream's header and token once", creds)
	}
}
