package demo

import (
	"strings"
	"testing"
	"time"
)

func TestFormatting(t *testing.T) {
	ws, sse := webSocketMode().words, sseMode().words
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
		{seqRange(7, 7), "event 7"},
		{seqRange(515, 600), "events 515–600"},

		{appLine(appStats{events: 1204, gaps: 2, missed: 11}, ws), "received 1,204 events, 2 gaps (11 missed), closes: 0"},
		{appLine(appStats{events: 1, gaps: 1, missed: 1, duplicates: 1, late: 2, snapshots: 1, ends: 1}, ws),
			"received 1 event, 1 gap (1 missed), 1 duplicate, 2 out of order, 1 snapshot, closes: 1"},
		{appLine(appStats{events: 1204, keepAlives: 3, requests: 1}, sse),
			"received 1,204 events, 0 gaps (0 missed), 3 keep-alives, 1 request, stream ends: 0"},
		{appLine(appStats{events: 1, gaps: 1, missed: 2, duplicates: 1, late: 1, notices: 1, announced: 2, tetherGaps: 1,
			keepAlives: 1, requests: 2, ends: 1}, sse),
			"received 1 event, 1 gap (2 missed), 1 duplicate, 1 out of order, 1 gap notice (2 given up), 1 tether-gap event, " +
				"1 keep-alive, 2 requests, stream ends: 1"},

		{tetherLine(tetherStats{losses: 3, failedDials: 2, reconnects: 3, longestDown: 3210 * time.Millisecond, replayed: 3}, ws),
			"3 upstream connections lost, 2 dials refused or failed, 3 reconnects, longest downtime 3.21s, 3 subscriptions replayed"},
		{tetherLine(tetherStats{losses: 3, failedDials: 2, reconnects: 3, longestDown: 3210 * time.Millisecond}, sse),
			"3 upstream streams lost, 2 requests refused or failed, 3 reconnects, longest downtime 3.21s"},
		{tetherLine(tetherStats{losses: 1, gaveUp: true}, sse),
			"1 upstream stream lost, 0 requests refused or failed, 0 reconnects, and it GAVE UP"},
		{recoveryLine(tetherStats{resumes: 2, resyncs: 1, gapsFilled: 3, duplicates: 5}),
			"2 resumes, 1 snapshot, 3 gaps filled, 0 given up, 5 duplicates dropped"},
		{recoveryLine(tetherStats{gapsLost: 1, duplicates: 2}), "0 gaps filled, 1 given up, 2 duplicates dropped"},

		{wsFeedLine(399, wsFeedStats{delivered: 221, replayed: 4}),
			"published 399 events: 221 sent live, 4 replayed after resumes, 0 served over HTTP"},
		{wsFeedLine(80, wsFeedStats{delivered: 70, served: 3, dropped: 3, repeated: 2}),
			"published 80 events: 70 sent live, 0 replayed after resumes, 3 served over HTTP; hiccups dropped 3 and repeated 2"},
		{sseFeedLine(600, sseFeedStats{requests: 6, fresh: 1, resumed: 3, replayed: 304, refused: 2}),
			"published 600 events; 6 requests from tether: 1 new, 3 resumed with Last-Event-ID (304 events replayed), 2 refused with 503"},
		{sseFeedLine(9, sseFeedStats{requests: 2, fresh: 1, resumed: 1, replayed: 1, lost: 4}),
			"published 9 events; 2 requests from tether: 1 new, 1 resumed with Last-Event-ID (1 event replayed), 0 refused with 503; " +
				"4 events no longer kept when asked for"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
}

// The WebSocket demo's summary: what the client saw, and the verdict a
// reader looks for.
func TestSummaryVerdict(t *testing.T) {
	tests := []struct {
		name   string
		client appStats
		want   string
		absent string
	}{
		{"survived", appStats{events: 10}, "closes: 0, the client's one socket stayed open", "!!!"},
		{"survived a snapshot", appStats{events: 10, snapshots: 1},
			"every event reached the client once and in order, from each snapshot on.", "!!!"},
		{"saw a gap", appStats{events: 10, gaps: 1, missed: 3},
			"!!! the client saw 1 silent gap, 0 duplicates and 0 events out of order", "every event reached"},
		{"closed", appStats{ends: 1, endedBy: "tether closed the socket with 1001"},
			"!!! closes: 1, the client's socket was closed (tether closed the socket with 1001)", "closes: 0"},
		{"answers from the feed", appStats{events: 10, welcomes: 1, acks: 1},
			"client   received 10 events, 0 gaps (0 missed), closes: 0, 1 welcome and 1 subscription answer from the feed", "!!!"},
	}
	m := webSocketMode()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, out := newTestNarrator(m, 0, false)
			n.summary(report{elapsed: 20 * time.Second, seed: 7, app: tc.client,
				faults: countsLine(m.repertoire, []int{0, 0, 1, 0, 0}),
				tether: tetherStats{losses: 1, reconnects: 1, replayed: 1,
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

// The SSE demo's summary, from the same code in its words.
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
			"!!! tether exists to keep that stream open: this is a tether bug",
		}, "stayed open"},
		{"gave up", appStats{events: 600, ends: 1, requests: 2, gaveUp: "HTTP 502", lastSeq: 600}, []string{
			"!!! stream ends: 1, the app's stream ended (HTTP 502).",
		}, "stayed open"},
		{"duplicates", appStats{events: 600, duplicates: 2, lastSeq: 600}, []string{
			"!!! the app saw 0 silent gaps, 2 duplicates and 0 events out of order",
		}, "every event reached"},
	}
	m := sseMode()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, out := newTestNarrator(m, 0, false)
			n.summary(report{elapsed: 30 * time.Second, seed: 5, app: tc.app, published: 600,
				faults: countsLine(m.repertoire, []int{0, 0, 0, 0, 1, 0}),
				tether: tetherStats{losses: 1, failedDials: 2, reconnects: 1, longestDown: 10 * time.Second},
				feed:   sseFeedLine(600, sseFeedStats{requests: 4, fresh: 1, resumed: 1, replayed: 203, refused: 2})})
			s := out.String()
			for _, want := range append(tc.want, "summary after 30.0s (seed 5)", "faults   1: 1 overload",
				"tether   1 upstream stream lost, 2 requests refused or failed, 1 reconnect, longest downtime 10.00s",
				"feed     published 600 events; 4 requests from tether", "app      received ",
				"on every upstream reconnect tether sent the feed the last id it had as Last-Event-ID") {
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

func TestHeader(t *testing.T) {
	tests := []struct {
		mode mode
		want []string
	}{
		{webSocketMode(), []string{
			"tether demo: a flaky price feed, tether in front of it, and a naive client",
			"seed 9 (-seed 9 replays the same faults), a fault every ~4s, 20 events/s, for 30s",
			"at least 1s after 1012, 1s after 1013",
			"gaps fetched over HTTP, given up after 2s with a notice",
		}},
		{sseMode(), []string{
			"tether demo -sse: a flaky Server-Sent Events price feed",
			"seed 9 (-seed 9 replays the same faults), a fault every ~4s, 20 events/s, for 30s",
			"after 2s of silence (ping interval 1s + timeout 1s: SSE has no ping)",
			"backoff full jitter 200ms..3s, never sooner than the feed's retry or Retry-After",
		}},
	}
	for _, tc := range tests {
		n, out := newTestNarrator(tc.mode, 0, false)
		n.header(Options{Seed: 9, FaultEvery: 4 * time.Second, Rate: 20, Duration: 30 * time.Second})
		for _, want := range tc.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("header lacks %q:\n%s", want, out.String())
			}
		}
	}
}
