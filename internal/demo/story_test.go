package demo

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// fixedClock stamps every zap entry with the same instant.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                         { return c.t }
func (c fixedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// newTestNarrator returns a narrator that started at t0 and whose clock
// reads t0+at, and the buffer it writes to.
func newTestNarrator(at time.Duration, verbose bool) (*narrator, *bytes.Buffer) {
	var out bytes.Buffer
	n := newNarrator(&out, func() time.Time { return t0 }, demoSettings, verbose)
	n.now = func() time.Time { return t0.Add(at) }
	return n, &out
}

// tetherLogger is the logger tether gets, named and scoped as the proxy
// scopes a session's upstream logger.
func tetherLogger(n *narrator, at time.Duration) *zap.Logger {
	return n.logger().WithOptions(zap.WithClock(fixedClock{t0.Add(at)})).
		Named("proxy").With(zap.Uint64("session", 1)).Named("upstream")
}

// The fields below are the ones upstream/log.go, upstream/client.go,
// upstream/serve.go and proxy/*.go attach to these messages.
func TestStoryLines(t *testing.T) {
	tests := []struct {
		name   string
		log    func(*zap.Logger)
		want   string
		counts tetherStats
	}{
		{
			name: "reset",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 143*time.Millisecond),
					zap.String("reason", "read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"))
			},
			want:   "  12.3s  tether  upstream lost: connection reset by peer → retry #1 in 143ms",
			counts: tetherStats{losses: 1},
		},
		{
			name: "closed without a close frame",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 20*time.Millisecond),
					zap.String("reason", "unexpected EOF"))
			},
			want:   "  12.3s  tether  upstream lost: connection closed without a close frame → retry #1 in 20ms",
			counts: tetherStats{losses: 1},
		},
		{
			name: "half-open without a known start",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 90*time.Millisecond),
					zap.String("reason", "heartbeat timeout"))
			},
			want:   "  12.3s  tether  half-open detected: no frame within ping interval 1s + timeout 1s → retry #1 in 90ms",
			counts: tetherStats{losses: 1},
		},
		{
			name: "restart",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 1120*time.Millisecond),
					zap.Int("close_code", 1012), zap.String("close_reason", "service restart"),
					zap.String("reason", `upstream closed with 1012 "service restart"`))
			},
			want:   `  12.3s  tether  upstream closed with 1012 "service restart" → retry #1 in 1.12s (restart floor 1s + jitter)`,
			counts: tetherStats{losses: 1},
		},
		{
			name: "try again later",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 1040*time.Millisecond),
					zap.Int("close_code", 1013), zap.String("close_reason", "try again later"),
					zap.String("reason", `upstream closed with 1013 "try again later"`))
			},
			want:   `  12.3s  tether  upstream closed with 1013 "try again later" → retry #1 in 1.04s (try-again floor 1s + jitter)`,
			counts: tetherStats{losses: 1},
		},
		{
			name: "503 with Retry-After",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 2), zap.Duration("delay", 1370*time.Millisecond),
					zap.Int("http_status", 503), zap.Duration("retry_after", time.Second),
					zap.String("reason", `upstream answered HTTP 503 (retry after 1s)`))
			},
			want:   "  12.3s  tether  retry #1 refused: HTTP 503, Retry-After 1s → retry #2 in 1.37s (Retry-After 1s + jitter)",
			counts: tetherStats{failedDials: 1},
		},
		{
			name: "first dial refused",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 185*time.Millisecond),
					zap.Int("http_status", 502), zap.String("reason", "upstream answered HTTP 502"))
			},
			want:   "  12.3s  tether  first dial refused: HTTP 502 → retry #1 in 185ms",
			counts: tetherStats{failedDials: 1},
		},
		{
			name: "dial failed",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 3), zap.Duration("delay", 610*time.Millisecond),
					zap.String("reason", "dial upstream: dial tcp 127.0.0.1:9: connect: connection refused"))
			},
			want:   "  12.3s  tether  retry #2 failed: connection refused → retry #3 in 610ms",
			counts: tetherStats{failedDials: 1},
		},
		{
			name: "back",
			log: func(l *zap.Logger) {
				l.Info("upstream confirmed", zap.Uint64("gen", 4), zap.Int("attempt", 3),
					zap.Duration("downtime", 2410*time.Millisecond))
			},
			want:   "  12.3s  tether  upstream back on retry #3 (downtime 2.41s)",
			counts: tetherStats{reconnects: 1, longestDown: 2410 * time.Millisecond},
		},
		{
			name: "first confirmation",
			log: func(l *zap.Logger) {
				l.Info("upstream confirmed", zap.Uint64("gen", 1), zap.Int("attempt", 0))
			},
			want: "  12.3s  tether  upstream connected; the feed's welcome confirmed it",
		},
		{
			name: "subscription replayed",
			log: func(l *zap.Logger) {
				l.Info("session restored", zap.Uint64("gen", 2), zap.Int("auth_sent", 0), zap.Int("replayed", 1),
					zap.Int("outbox_flushed", 0), zap.Int("unacked_resent", 0))
			},
			want:   "  12.3s  tether  session restored on the new connection: subscriptions replayed: 1",
			counts: tetherStats{replayed: 1},
		},
		{
			name: "everything restored",
			log: func(l *zap.Logger) {
				l.Info("session restored", zap.Uint64("gen", 3), zap.Int("auth_sent", 1), zap.Int("replayed", 2),
					zap.Int("outbox_flushed", 3), zap.Int("unacked_resent", 4))
			},
			want: "  12.3s  tether  session restored on the new connection: login re-sent, subscriptions replayed: 2, " +
				"queued messages sent: 3, unacknowledged messages re-sent: 4",
			counts: tetherStats{replayed: 2},
		},
		{
			name: "nothing to restore is silent",
			log: func(l *zap.Logger) {
				l.Info("session restored", zap.Uint64("gen", 1), zap.Int("auth_sent", 0), zap.Int("replayed", 0),
					zap.Int("outbox_flushed", 0), zap.Int("unacked_resent", 0))
			},
		},
		{
			name: "resume sent",
			log: func(l *zap.Logger) {
				l.Info("session restored", zap.Uint64("gen", 2), zap.Int("auth_sent", 0), zap.Int("resumed", 1),
					zap.Int("replayed", 1), zap.Int("outbox_flushed", 0), zap.Int("unacked_resent", 0))
			},
			want: "  12.3s  tether  session restored on the new connection: resume sent (after the client's last event), " +
				"subscriptions replayed: 1",
			counts: tetherStats{replayed: 1},
		},
		{
			name: "gap opened",
			log: func(l *zap.Logger) {
				l.Info("gap opened", zap.String("stream", ""), zap.Int64("gap_from", 412), zap.Int64("gap_to", 414))
			},
			want: "  12.3s  tether  gap 412–414 in the stream: holding what follows, fetching the missing events over HTTP",
		},
		{
			name: "gap filled over HTTP",
			log: func(l *zap.Logger) {
				l.Info("gap filled", zap.String("stream", ""), zap.Int64("gap_from", 412), zap.Int64("gap_to", 414),
					zap.String("method", "http"), zap.Duration("duration", 3*time.Millisecond))
			},
			want:   "  12.3s  tether  gap 412–414 filled over HTTP in 3ms: the held events follow, in order",
			counts: tetherStats{gapsFilled: 1},
		},
		{
			name: "duplicates dropped",
			log: func(l *zap.Logger) {
				l.Info("duplicates dropped", zap.Int("count", 3))
			},
			want:   "  12.3s  tether  dropped 3 duplicate events the client already has",
			counts: tetherStats{duplicates: 3},
		},
		{
			name: "stream resumed",
			log: func(l *zap.Logger) {
				l.Info("stream resumed", zap.String("stream", ""), zap.Int64("seq", 1235), zap.Uint64("gen", 3))
			},
			want:   "  12.3s  tether  the feed resumed the stream where the client left it: replay from event 1,235, nothing lost, nothing twice",
			counts: tetherStats{resumes: 1},
		},
		{
			name: "stream resynced",
			log: func(l *zap.Logger) {
				l.Info("stream resynced", zap.String("stream", ""), zap.Int64("seq", 2040), zap.Int("held_dropped", 0))
			},
			want: "  12.3s  tether  the feed could not replay that far back and sent a snapshot at event 2,040: " +
				"tether passes it on and restarts the count there",
			counts: tetherStats{resyncs: 1},
		},
		{
			name: "gap given up",
			log: func(l *zap.Logger) {
				l.Warn("gap given up, app notified", zap.String("stream", ""), zap.Int64("gap_from", 7),
					zap.Int64("gap_to", 7), zap.String("reason", "not filled within TETHER_GAP_TIMEOUT"))
			},
			want:   "  12.3s  tether  !!! gap 7 not filled within 2s: gap given up, app notified",
			counts: tetherStats{gapsLost: 1},
		},
		{
			name: "gave up",
			log: func(l *zap.Logger) {
				l.Error("upstream failed permanently", zap.Error(errors.New("permanent upstream failure: HTTP 404")))
			},
			want:   "  12.3s  tether  !!! gave up on the upstream: permanent upstream failure: HTTP 404",
			counts: tetherStats{gaveUp: true},
		},
		{
			name: "unknown warning is shown raw",
			log: func(l *zap.Logger) {
				l.Warn("outbox full, message dropped", zap.Int("outbox_messages", 10))
			},
			want: "  12.3s  tether  [warn] outbox full, message dropped outbox_messages=10 session=1",
		},
		{
			name: "unknown info and debug are silent",
			log: func(l *zap.Logger) {
				l.Info("upstream connected", zap.Uint64("gen", 2))
				l.Info("draining", zap.Int("sessions", 0))
				l.Debug("upstream message not delivered, app is closing")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const at = 12300 * time.Millisecond
			n, out := newTestNarrator(0, false)
			tc.log(tetherLogger(n, at))
			got := strings.TrimSuffix(out.String(), "\n")
			if got != tc.want {
				t.Errorf("narration\n got: %q\nwant: %q", got, tc.want)
			}
			if st := n.tetherStats(); st != tc.counts {
				t.Errorf("stats = %+v, want %+v", st, tc.counts)
			}
		})
	}
}

// A half-open fault starts a silence; tether's detection and its return
// are narrated against it.
func TestStoryHalfOpenMeasuresSilence(t *testing.T) {
	n, out := newTestNarrator(10*time.Second, false)
	n.fault(faultHalfOpen)
	l := n.logger().Named("proxy.upstream")
	l.WithOptions(zap.WithClock(fixedClock{t0.Add(12100 * time.Millisecond)})).Info("upstream reconnect scheduled",
		zap.Int("attempt", 1), zap.Duration("delay", 60*time.Millisecond), zap.String("reason", "heartbeat timeout"))
	l.WithOptions(zap.WithClock(fixedClock{t0.Add(12200 * time.Millisecond)})).Info("upstream confirmed",
		zap.Int("attempt", 1), zap.Duration("downtime", 100*time.Millisecond))
	want := []string{
		"  10.0s  fault   half-open: the feed goes silent (no events, no pongs) but keeps TCP open",
		"  12.1s  tether  half-open detected: no frame for 2.1s (ping interval 1s + timeout 1s) → retry #1 in 60ms",
		"  12.2s  tether  upstream back on retry #1 (downtime 0.10s after detection, 2.2s since the feed went silent)",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("narration:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestStoryVerbose(t *testing.T) {
	n, out := newTestNarrator(0, true)
	l := n.logger().WithOptions(zap.WithClock(fixedClock{t0}))
	if !l.Core().Enabled(zapcore.DebugLevel) {
		t.Fatal("verbose narrator does not take debug entries")
	}
	l.Debug("upstream message not delivered, app is closing", zap.Int("bytes", 12))
	l.Info("upstream connected", zap.Uint64("gen", 2), zap.String("protocol", ""))
	want := []string{
		"   0.0s  tether  [debug] upstream message not delivered, app is closing bytes=12",
		"   0.0s  tether  upstream connected gen=2 protocol=",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("narration:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	quiet, _ := newTestNarrator(0, false)
	if quiet.logger().Core().Enabled(zapcore.DebugLevel) {
		t.Error("quiet narrator takes debug entries")
	}
}

func TestFormatting(t *testing.T) {
	tests := []struct{ got, want string }{
		{fmtDelay(143 * time.Millisecond), "143ms"},
		{fmtDelay(1206 * time.Millisecond), "1.21s"},
		{fmtSetting(time.Second), "1s"},
		{fmtSetting(1500 * time.Millisecond), "1.5s"},
		{fmtSetting(2 * time.Minute), "2m"},
		{fmtCount(0), "0"},
		{fmtCount(999), "999"},
		{fmtCount(1204), "1,204"},
		{fmtCount(-1234567), "-1,234,567"},
		{plural(1, "gap", "gaps"), "1 gap"},
		{plural(2, "gap", "gaps"), "2 gaps"},
		{plural(1000, "gap", "gaps"), "1,000 gaps"},
		{clientLine(clientStats{events: 1204, gaps: 2, missed: 11}), "received 1,204 events, 2 gaps (11 missed), closes: 0"},
		{clientLine(clientStats{events: 1, gaps: 1, missed: 1, duplicates: 1, late: 2, closes: 1}),
			"received 1 event, 1 gap (1 missed), 1 duplicate, 2 out of order, closes: 1"},
		{faultLine([numFaultKinds]int{faultReset: 2, faultOverload: 1}), "3: 2 TCP resets, 1 overload"},
		{faultLine([numFaultKinds]int{}), "none injected"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestSummaryVerdict(t *testing.T) {
	tests := []struct {
		name   string
		client clientStats
		want   string
		absent string
	}{
		{"survived", clientStats{events: 10}, "closes: 0, the client's one socket stayed open", "!!!"},
		{"survived a snapshot", clientStats{events: 10, snapshots: 1},
			"every event reached the client once and in order, from each snapshot on.", "!!!"},
		{"saw a gap", clientStats{events: 10, gaps: 1, missed: 3},
			"!!! the client saw 1 silent gap, 0 duplicates and 0 events out of order", "every event reached"},
		{"closed", clientStats{closes: 1, closedBy: "tether closed the socket with 1001"},
			"!!! closes: 1, the client's socket was closed (tether closed the socket with 1001)", "closes: 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, out := newTestNarrator(0, false)
			n.summary(report{elapsed: 20 * time.Second, seed: 7, client: tc.client,
				faults: [numFaultKinds]int{faultRestart: 1}, tether: tetherStats{losses: 1, reconnects: 1, replayed: 1,
					longestDown: time.Second, resumes: 2, resyncs: 1, gapsFilled: 3, duplicates: 5}})
			s := out.String()
			for _, want := range []string{tc.want, "summary after 20.0s (seed 7)", "faults   1: 1 server restart",
				"tether   1 upstream connection lost, 0 dials refused or failed, 1 reconnect, longest downtime 1.00s, 1 subscription replayed",
				"recovery 2 resumes, 1 snapshot, 3 gaps filled, 0 given up, 5 duplicates dropped",
				"on every new connection tether asked the feed to resume after the client's last event"} {
				if !strings.Contains(s, want) {
					t.Errorf("summary lacks %q:\n%s", want, s)
				}
			}
			if strings.Contains(s, tc.absent) {
				t.Errorf("summary contains %q:\n%s", tc.absent, s)
			}
		})
	}
}
