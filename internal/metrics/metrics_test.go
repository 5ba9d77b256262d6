package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/metrics"
)

func newMetrics(t *testing.T) (*prometheus.Registry, *metrics.Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "v1.2.3")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return reg, m
}

func TestCloseCodeLabel(t *testing.T) {
	permanent := func(c int) bool { return c == 1008 || c >= 4500 && c <= 4599 }
	reauth := func(c int) bool { return c == 4001 || c == 3401 }
	tests := []struct {
		code int
		want string
	}{
		{0, "none"},
		{1000, "1000"}, {1005, "1005"}, {1008, "1008"}, {1012, "1012"}, {1015, "1015"},
		{1016, "other"}, {2999, "other"}, {999, "other"}, {5000, "other"}, {-1, "other"},
		{3000, "3xxx"}, {3401, "reauth"}, {3999, "3xxx"},
		{4000, "4xxx"}, {4001, "reauth"}, {4500, "permanent"}, {4599, "permanent"}, {4999, "4xxx"},
	}
	for _, tc := range tests {
		if got := metrics.CloseCodeLabel(tc.code, permanent, reauth); got != tc.want {
			t.Errorf("CloseCodeLabel(%d) = %q, want %q", tc.code, got, tc.want)
		}
	}
	if got := metrics.CloseCodeLabel(4500, nil, nil); got != "4xxx" {
		t.Errorf("CloseCodeLabel(4500) without classes = %q, want 4xxx", got)
	}
	seen := map[string]bool{}
	for code := -10; code <= 6000; code++ {
		seen[metrics.CloseCodeLabel(code, permanent, reauth)] = true
	}
	if len(seen) > 22 {
		t.Errorf("%d distinct code labels over -10…6000, want at most 22", len(seen))
	}
}

// Two instances on two registries are independent; the same registry refuses
// a second instance instead of panicking.
func TestNewIsolated(t *testing.T) {
	reg, a := newMetrics(t)
	_, b := newMetrics(t)
	a.SessionStarted(labels.ListenerWS)
	if got := testutil.ToFloat64(b.Sessions.WithLabelValues(labels.ListenerWS)); got != 0 {
		t.Errorf("second instance sees %v sessions, want 0", got)
	}
	if _, err := metrics.New(reg, "again"); err == nil {
		t.Error("New on a registry that has the collectors already succeeded")
	}
	if err := metrics.RegisterRuntime(reg); err != nil {
		t.Errorf("RegisterRuntime: %v", err)
	}
	if err := metrics.RegisterRuntime(reg); err == nil {
		t.Error("RegisterRuntime twice on one registry succeeded")
	}
}

// Known label values exist at zero from the start; build info carries the
// version.
func TestPrecreated(t *testing.T) {
	reg, _ := newMetrics(t)
	want := `
# HELP tether_build_info Always 1; the version label is tether's version.
# TYPE tether_build_info gauge
tether_build_info{version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tether_build_info"); err != nil {
		t.Error(err)
	}
	for name, n := range map[string]int{
		"tether_upstream_dials_total":           18,
		"tether_upstream_disconnects_total":     6, // every reason but close, code="none"
		"tether_app_handshake_rejections_total": 10,
		"tether_gaps_total":                     8,
		"tether_recoveries_total":               3,
		"tether_sse_resumes_total":              5,
		"tether_messages_total":                 8, // 2 directions × 4 listener kinds
		"tether_sessions":                       4, // one per listener kind
		"tether_app_dropped_total":              11,
	} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != n {
			t.Errorf("%s has %d series at start (%v), want %d", name, got, err, n)
		}
	}
}

// Each event moves its series and nothing else.
func TestEvents(t *testing.T) {
	_, m := newMetrics(t)
	obs := metrics.UpstreamObserver{Metrics: m, Permanent: func(c int) bool { return c == 4500 }}
	m.SessionStarted(labels.ListenerWS)
	m.SessionStarted(labels.ListenerWS)
	m.SessionEnded(labels.ListenerWS)
	m.SessionStarted(labels.ListenerTCP)
	m.Forwarded(labels.DirectionAppToUpstream, labels.ListenerWS, 1)
	m.Forwarded(labels.DirectionUpstreamToApp, labels.ListenerWS, 2) // a burst
	m.Forwarded(labels.DirectionUpstreamToApp, labels.ListenerUnix, 1)
	m.Forwarded(labels.DirectionAppToUpstream, labels.ListenerTCP, 1)
	m.AppDropped(labels.DropBinary)
	m.AppDropped(labels.DropBinary)
	m.AppDropped(labels.DropTooLarge)
	m.DroppedFromOutbox(3)
	m.DroppedFromOutbox(0)
	m.HandshakeRejected("max_sessions")
	m.DrainStarted()
	m.Replayed(4)
	m.DuplicateDropped()
	m.Gap(labels.GapSkipped)
	m.Recovered(labels.RecoveryResume)
	m.SSEResumed(labels.SSEForeignID)
	m.HeldBytesChanged(100)
	m.HeldBytesChanged(-40)
	obs.Dialed("ok")
	obs.Dialed("http_5xx")
	obs.Lost("reset", 0)
	obs.Lost("close", 1012)
	obs.Lost("close", 4500)
	obs.Confirmed(1500 * time.Millisecond)

	for name, tc := range map[string]struct {
		c    prometheus.Collector
		want float64
	}{
		"sessions ws":          {m.Sessions.WithLabelValues("ws"), 1},
		"sessions tcp":         {m.Sessions.WithLabelValues("tcp"), 1},
		"sessions unix":        {m.Sessions.WithLabelValues("unix"), 0},
		"app_to_upstream ws":   {m.Messages.WithLabelValues("app_to_upstream", "ws"), 1},
		"upstream_to_app ws":   {m.Messages.WithLabelValues("upstream_to_app", "ws"), 2},
		"upstream_to_app unix": {m.Messages.WithLabelValues("upstream_to_app", "unix"), 1},
		"app_to_upstream tcp":  {m.Messages.WithLabelValues("app_to_upstream", "tcp"), 1},
		"upstream_to_app tcp":  {m.Messages.WithLabelValues("upstream_to_app", "tcp"), 0},
		"dropped binary":       {m.Dropped.WithLabelValues("binary"), 2},
		"dropped too_large":    {m.Dropped.WithLabelValues("too_large"), 1},
		"dropped newline":      {m.Dropped.WithLabelValues("newline"), 0},
		"outbox dropped":       {m.OutboxDropped, 3},
		"max_sessions":         {m.HandshakeRejections.WithLabelValues("max_sessions"), 1},
		"draining":             {m.Draining, 1},
		"replayed":             {m.ReplayedMessages, 4},
		"duplicates":           {m.DuplicatesDropped, 1},
		"gap skipped":          {m.Gaps.WithLabelValues("skipped"), 1},
		"gap filled":           {m.Gaps.WithLabelValues("filled"), 0},
		"recovered resume":     {m.Recoveries.WithLabelValues("resume"), 1},
		"sse foreign id":       {m.SSEResumes.WithLabelValues("foreign_id"), 1},
		"held bytes":           {m.HeldBytes, 60},
		"dials ok":             {m.UpstreamDials.WithLabelValues("ok"), 1},
		"dials 5xx":            {m.UpstreamDials.WithLabelValues("http_5xx"), 1},
		"lost reset":           {m.UpstreamDisconnects.WithLabelValues("reset", "none"), 1},
		"lost 1012":            {m.UpstreamDisconnects.WithLabelValues("close", "1012"), 1},
		"lost permanent":       {m.UpstreamDisconnects.WithLabelValues("close", "permanent"), 1},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%s = %v, want %v", name, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(m.ReconnectSeconds); n != 1 {
		t.Fatalf("reconnect histogram has %d series, want 1", n)
	}
	want := `
# HELP tether_reconnect_seconds Time from the loss of a confirmed upstream connection to the confirmation of its replacement.
# TYPE tether_reconnect_seconds histogram
tether_reconnect_seconds_bucket{le="0.01"} 0
tether_reconnect_seconds_bucket{le="0.02"} 0
tether_reconnect_seconds_bucket{le="0.05"} 0
tether_reconnect_seconds_bucket{le="0.1"} 0
tether_reconnect_seconds_bucket{le="0.2"} 0
tether_reconnect_seconds_bucket{le="0.5"} 0
tether_reconnect_seconds_bucket{le="1"} 0
tether_reconnect_seconds_bucket{le="2"} 1
tether_reconnect_seconds_bucket{le="5"} 1
tether_reconnect_seconds_bucket{le="10"} 1
tether_reconnect_seconds_bucket{le="20"} 1
tether_reconnect_seconds_bucket{le="30"} 1
tether_reconnect_seconds_bucket{le="60"} 1
tether_reconnect_seconds_bucket{le="120"} 1
tether_reconnect_seconds_bucket{le="300"} 1
tether_reconnect_seconds_bucket{le="+Inf"} 1
tether_reconnect_seconds_sum 1.5
tether_reconnect_seconds_count 1
`
	if err := testutil.CollectAndCompare(m.ReconnectSeconds, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// A label value outside the known sets is still counted, under its own
// series, rather than lost or folded into a known one.
func TestMessageUnknownLabels(t *testing.T) {
	_, m := newMetrics(t)
	m.Forwarded("sideways", labels.ListenerWS, 1)
	m.Forwarded(labels.DirectionAppToUpstream, "carrier-pigeon", 1)
	for _, labels := range [][2]string{{"sideways", "ws"}, {"app_to_upstream", "carrier-pigeon"}} {
		if got := testutil.ToFloat64(m.Messages.WithLabelValues(labels[0], labels[1])); got != 1 {
			t.Errorf("messages%v = %v, want 1", labels, got)
		}
	}
	if got := testutil.ToFloat64(m.Messages.WithLabelValues("app_to_upstream", "ws")); got != 0 {
		t.Errorf("messages{app_to_upstream,ws} = %v, want 0", got)
	}
}

// The outbox gauge reads its source at each collection; without one it is 0.
func TestOutboxSource(t *testing.T) {
	_, m := newMetrics(t)
	if got := testutil.ToFloat64(m.OutboxMessages); got != 0 {
		t.Errorf("outbox gauge without a source = %v, want 0", got)
	}
	depth := 7
	m.SetOutboxSource(func() int { return depth })
	if got := testutil.ToFloat64(m.OutboxMessages); got != 7 {
		t.Errorf("outbox gauge = %v, want 7", got)
	}
	depth = 2
	if got := testutil.ToFloat64(m.OutboxMessages); got != 2 {
		t.Errorf("outbox gauge after a flush = %v, want 2", got)
	}
}

// The registry passes promlint-style checks: names, units, help texts.
func TestLint(t *testing.T) {
	reg, _ := newMetrics(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
