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

// newTestNarrator returns a narrator in m's words that started at t0 and
// whose clock reads t0+at, and the buffer it writes to.
func newTestNarrator(m mode, at time.Duration, verbose bool) (*narrator, *bytes.Buffer) {
	var out bytes.Buffer
	n := newNarrator(&out, func() time.Time { return t0 }, demoSettings, verbose, m.words)
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
			want:   "  12.3s  tether  dropped 3 duplicate events the client already has (their seq, TETHER_SEQ_PATH, is not above the last one passed on)",
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
			n, out := newTestNarrator(webSocketMode(), 0, false)
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
	n, out := newTestNarrator(webSocketMode(), 10*time.Second, false)
	n.fault(faultOf(t, webSocketMode(), faultStall))
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
	n, out := newTestNarrator(webSocketMode(), 0, true)
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
	quiet, _ := newTestNarrator(webSocketMode(), 0, false)
	if quiet.logger().Core().Enabled(zapcore.DebugLevel) {
		t.Error("quiet narrator takes debug entries")
	}
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
			want:   "  12.3s  tether  upstream lost: the response was cut short (unexpected EOF) → retry #1 in 900ms",
			counts: tetherStats{losses: 1},
		},
		{
			name: "silence without a known start",
			log: func(l *zap.Logger) {
				l.Info("upstream reconnect scheduled", zap.Int("attempt", 1), zap.Duration("delay", 1500*time.Millisecond),
					zap.String("reason", "heartbeat timeout"))
			},
			want: "  12.3s  tether  silent stream given up: not a byte within the idle limit, ping interval 1s + timeout 1s, " +
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
			n, out := newTestNarrator(sseMode(), 0, false)
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
	n, out := newTestNarrator(sseMode(), 10*time.Second, false)
	n.fault(faultOf(t, sseMode(), faultStall))
	l := n.logger().Named("proxy.upstream")
	l.WithOptions(zap.WithClock(fixedClock{t0.Add(12100 * time.Millisecond)})).Info("upstream reconnect scheduled",
		zap.Int("attempt", 1), zap.Duration("delay", 1200*time.Millisecond), zap.String("reason", "heartbeat timeout"),
		zap.Duration("floor", time.Second))
	l.WithOptions(zap.WithClock(fixedClock{t0.Add(13300 * time.Millisecond)})).Info("upstream confirmed",
		zap.Int("attempt", 1), zap.Duration("downtime", 1200*time.Millisecond))
	want := []string{
		"  10.0s  fault   silent stall: the feed stops writing (no events, no keep-alive comments) but keeps TCP open",
		"  12.1s  tether  silent stream given up: not a byte for 2.1s (the idle limit, ping interval 1s + timeout 1s, " +
			"as SSE has no ping) → retry #1 in 1.20s (the feed's retry: 1000 as a floor + jitter)",
		"  13.3s  tether  upstream back on retry #1 (downtime 1.20s after detection, 3.3s since the feed went silent)",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("narration:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
