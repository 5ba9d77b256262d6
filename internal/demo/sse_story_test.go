package demo

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// newSSETestNarrator is newTestNarrator for the SSE demo.
func newSSETestNarrator(at time.Duration) (*narrator, *strings.Builder) {
	var out strings.Builder
	n := newNarrator(&out, func() time.Time { return t0 }, demoSettings, false)
	n.now = func() time.Time { return t0.Add(at) }
	n.story.sse = true
	return n, &out
}

// The fields below are the ones upstream/log.go, upstream/client.go and
// proxy/ssesession.go attach to these messages.
func TestSSEStoryLines(t *testing.T) {
	tests := []struct {
		name   string
		log    func(*zap.Logger)
		want   string
		counts tetherStats
	}{
		{
			name: "reset, with the feed's retry as a floor",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 1080*time.Millisecond),
					zap.String("reason", "sse: read stream: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"),
					zap.Duration("floor", time.Second))
			},
			want:   "  12.3s  tether  upstream lost: connection reset by peer → retry #1 in 1.08s (the feed's retry: 1000 as a floor + jitter)",
			counts: tetherStats{losses: 1},
		},
		{
			name: "clean end",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 2360*time.Millisecond),
					zap.String("reason", "upstream ended the event stream: EOF"), zap.Duration("floor", time.Second))
			},
			want: "  12.3s  tether  the feed ended the stream (a clean end: EventSource reconnects, so does tether) " +
				"→ retry #1 in 2.36s (the feed's retry: 1000 as a floor + jitter)",
			counts: tetherStats{losses: 1},
		},
		{
			name: "cut short",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 900*time.Millisecond),
					zap.String("reason", "sse: read stream: unexpected EOF"))
			},
			want:   "  12.3s  tether  upstream stream cut mid-response (unexpected EOF) → retry #1 in 900ms",
			counts: tetherStats{losses: 1},
		},
		{
			name: "silence without a known start",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 1500*time.Millisecond),
					zap.String("reason", "heartbeat timeout"))
			},
			want: "  12.3s  tether  silent stream given up: no byte within the idle limit = ping interval 1s + timeout 1s, " +
				"as SSE has no ping → retry #1 in 1.50s",
			counts: tetherStats{losses: 1},
		},
		{
			name: "503 with Retry-After",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 2), zap.Duration("delay", 4470*time.Millisecond),
					zap.Int("http_status", 503), zap.Duration("retry_after", 2*time.Second),
					zap.String("reason", "upstream answered HTTP 503"), zap.Duration("floor", 2*time.Second))
			},
			want:   "  12.3s  tether  retry #1 refused: HTTP 503, Retry-After 2s → retry #2 in 4.47s (Retry-After 2s + jitter)",
			counts: tetherStats{failedDials: 1},
		},
		{
			name: "first request fails",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 150*time.Millisecond),
					zap.String("reason", "dial upstream: dial tcp 127.0.0.1:9: connect: connection refused"))
			},
			want:   "  12.3s  tether  first request failed: connection refused → retry #1 in 150ms",
			counts: tetherStats{failedDials: 1},
		},
		{
			name: "first confirmation",
			log:  func(l *zap.Logger) { l.Info("upstream confirmed", zap.Uint64("gen", 1), zap.Int("attempt", 0)) },
			want: "  12.3s  tether  upstream stream open; its first event confirmed it",
		},
		{
			name: "back after an outage",
			log: func(l *zap.Logger) {
				l.Info("upstream confirmed", zap.Uint64("gen", 2), zap.Int("attempt", 1), zap.Duration("downtime", 1090*time.Millisecond))
			},
			want:   "  12.3s  tether  upstream back on retry #1 (downtime 1.09s)",
			counts: tetherStats{reconnects: 1, longestDown: 1090 * time.Millisecond},
		},
		{
			name: "duplicates",
			log:  func(l *zap.Logger) { l.Info("duplicates dropped", zap.Int("count", 2)) },
			want: "  12.3s  tether  dropped 2 duplicate events the app already has " +
				"(their seq, TETHER_SEQ_PATH, is not above the last one passed on)",
			counts: tetherStats{duplicates: 2},
		},
		{
			name: "app connected",
			log: func(l *zap.Logger) {
				l.Info("app connected", zap.String("remote", "127.0.0.1:5"), zap.Bool("upstream_connected", true))
			},
			want: "  12.3s  tether  accepted the app's EventSource request: from now on tether keeps that one response open, " +
				"whatever the upstream does",
		},
		{
			name: "app gone, session lingers",
			log: func(l *zap.Logger) {
				l.Info("sse app disconnected; its session waits for it to reconnect", zap.String("remote", "127.0.0.1:5"),
					zap.Duration("linger", 30*time.Second), zap.NamedError("cause", nil))
			},
			want: "  12.3s  tether  the app's request ended; its session (upstream stream and events) waits 30s " +
				"(TETHER_SSE_LINGER) for it to come back with Last-Event-ID",
		},
		{
			name: "app resumed",
			log: func(l *zap.Logger) {
				l.Info("sse app reconnected, stream resumed", zap.String("remote", "127.0.0.1:5"), zap.Uint64("after", 41))
			},
			want: "  12.3s  tether  the app came back with Last-Event-ID …-41: its stream resumes after event 41 of the session",
		},
		{
			name: "app back too late",
			log: func(l *zap.Logger) {
				l.Warn("sse app reconnected after events its session no longer holds; tether-gap sent",
					zap.Uint64("after", 4), zap.Uint64("lost", 7))
			},
			want: "  12.3s  tether  !!! the app came back too late: 7 events it missed are no longer kept; " +
				"tether said so with a tether-gap event",
		},
		{
			name: "shared entries are told as in the WebSocket demo",
			log:  func(l *zap.Logger) { l.Info("shutting down") },
			want: "  12.3s  tether  shutting down",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const at = 12300 * time.Millisecond
			n, out := newSSETestNarrator(0)
			tc.log(tetherLogger(n, at))
			if got := strings.TrimSuffix(out.String(), "\n"); got != tc.want {
				t.Errorf("narration\n got: %q\nwant: %q", got, tc.want)
			}
			if st := n.tetherStats(); st != tc.counts {
				t.Errorf("stats = %+v, want %+v", st, tc.counts)
			}
		})
	}
}

// A stall starts a silence; tether's detection and its return are
// narrated against it.
func TestSSEStoryStallMeasuresSilence(t *testing.T) {
	n, out := newSSETestNarrator(10 * time.Second)
	n.sseFault(sseStall)
	l := n.logger().Named("proxy.upstream")
	l.WithOptions(zap.WithClock(fixedClock{t0.Add(12100 * time.Millisecond)})).Info("upstream reconnect scheduled",
		zap.Int("attempt", 1), zap.Duration("delay", 1200*time.Millisecond), zap.String("reason", "heartbeat timeout"),
		zap.Duration("floor", time.Second))
	l.WithOptions(zap.WithClock(fixedClock{t0.Add(13300 * time.Millisecond)})).Info("upstream confirmed",
		zap.Int("attempt", 1), zap.Duration("downtime", 1200*time.Millisecond))
	want := []string{
		"  10.0s  fault   silent stall: the feed stops writing (no events, no keep-alive comments) but keeps TCP open",
		"  12.1s  tether  silent stream given up: not a byte for 2.1s, not even a comment (idle limit = ping interval 1s + timeout 1s, " +
			"as SSE has no ping) → retry #1 in 1.20s (the feed's retry: 1000 as a floor + jitter)",
		"  13.3s  tether  upstream back on retry #1 (downtime 1.20s after detection, 3.3s since the feed went silent)",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("narration:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSSEFormatting(t *testing.T) {
	tests := []struct{ got, want string }{
		{appLine(appStats{events: 1204, keepAlives: 3, requests: 1}),
			"received 1,204 events, 0 gaps (0 missed), 3 keep-alives, 1 request, stream ends: 0"},
		{appLine(appStats{events: 1, gaps: 1, missed: 2, duplicates: 1, late: 1, notices: 1, announced: 2, tetherGaps: 1,
			keepAlives: 1, requests: 2, ends: 1}),
			"received 1 event, 1 gap (2 missed), 1 duplicate, 1 out of order, 1 gap notice (2 given up), 1 tether-gap event, " +
				"1 keep-alive, 2 requests, stream ends: 1"},
		{sseFaultLine([numSSEFaults]int{sseReset: 2, sseHiccup: 1}), "3: 2 TCP resets, 1 hiccup"},
		{sseFaultLine([numSSEFaults]int{}), "none injected"},
		{sseTetherLine(tetherStats{losses: 3, failedDials: 2, reconnects: 3, longestDown: 3210 * time.Millisecond, duplicates: 2}),
			"3 upstream streams lost, 2 requests refused or failed, 3 reconnects, longest downtime 3.21s, 2 duplicates dropped"},
		{sseTetherLine(tetherStats{losses: 1, gapsLost: 1, gaveUp: true}),
			"1 upstream stream lost, 0 requests refused or failed, 0 reconnects, 0 duplicates dropped, 1 gap given up, and it GAVE UP"},
		{sseFeedLine(sseFeedStats{published: 600, requests: 6, fresh: 1, resumed: 3, replayed: 304, refused: 2}),
			"published 600 events; 6 requests from tether: 1 new, 3 resumed with Last-Event-ID (304 events replayed), 2 refused with 503"},
		{sseFeedLine(sseFeedStats{published: 9, requests: 2, fresh: 1, resumed: 1, replayed: 1, lost: 4}),
			"published 9 events; 2 requests from tether: 1 new, 1 resumed with Last-Event-ID (1 event replayed), 0 refused with 503; " +
				"4 events no longer kept when asked for"},
		{seqRange(7, 7), "event 7"},
		{seqRange(515, 600), "events 515–600"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
}

func TestSSESummary(t *testing.T) {
	tests := []struct {
		name   string
		app    appStats
		want   []string
		absent string
	}{
		{"survived", appStats{events: 590, requests: 1, lastSeq: 590, lastID: "TOKEN-590"}, []string{
			"stream ends: 0, the app's one EventSource request stayed open through every fault.",
			"every event reached the app once and in order.",
			"the app's last event id: TOKEN-590",
			"(events 591–600 had not reached the app when the demo stopped",
		}, "!!!"},
		{"all delivered", appStats{events: 600, requests: 1, lastSeq: 600}, []string{"every event reached the app once and in order."},
			"had not reached"},
		{"announced gap", appStats{events: 500, notices: 1, announced: 100, lastSeq: 600}, []string{
			"every event reached the app once and in order, except the announced gaps.",
		}, "!!!"},
		{"stream ended", appStats{events: 600, ends: 1, requests: 2, endedBy: "tether ended the response", lastSeq: 600}, []string{
			"!!! stream ends: 1, the app's stream ended (tether ended the response).",
			"this is a tether bug",
		}, "stayed open"},
		{"gave up", appStats{events: 600, ends: 1, requests: 2, gaveUp: "HTTP 502", lastSeq: 600}, []string{
			"!!! stream ends: 1, the app's stream ended (HTTP 502).",
		}, "stayed open"},
		{"duplicates", appStats{events: 600, duplicates: 2, lastSeq: 600}, []string{
			"!!! the app saw 0 silent gaps, 2 duplicates and 0 events out of order",
		}, "every event reached"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, out := newSSETestNarrator(0)
			n.sseSummary(sseReport{elapsed: 30 * time.Second, seed: 5, app: tc.app,
				faults: [numSSEFaults]int{sseOverload: 1},
				tether: tetherStats{losses: 1, failedDials: 2, reconnects: 1, longestDown: 10 * time.Second},
				feed:   sseFeedStats{published: 600, requests: 4, fresh: 1, resumed: 1, replayed: 203, refused: 2}})
			s := out.String()
			for _, want := range append(tc.want, "summary after 30.0s (seed 5)", "faults   1: 1 overload",
				"tether   1 upstream stream lost, 2 requests refused or failed, 1 reconnect, longest downtime 10.00s",
				"feed     published 600 events; 4 requests from tether", "app      received ") {
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

func TestSSEHeader(t *testing.T) {
	n, out := newSSETestNarrator(0)
	n.sseHeader(Options{Seed: 9, FaultEvery: 4 * time.Second, Rate: 20, Duration: 30 * time.Second}, demoSettings)
	for _, want := range []string{
		"tether demo -sse: a flaky Server-Sent Events price feed",
		"seed 9 (-seed 9 replays the same faults), a fault every ~4s, 20 events/s, for 30s",
		"after 2s of silence (ping interval 1s + timeout 1s: SSE has no ping)",
		"backoff full jitter 200ms..3s, never sooner than the feed's retry or Retry-After",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("header lacks %q:\n%s", want, out.String())
		}
	}
}
