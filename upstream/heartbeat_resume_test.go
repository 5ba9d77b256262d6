package upstream

import (
	"testing"
	"time"
)

// TestHeartbeatResumed: after a resume the connection is probed at once
// and is dead PingTimeout later unless a frame arrived since. The reader's
// progress does not answer it: a message handed over with nothing read
// came out of what tether had buffered before the sleep, and a message or
// Flush under way at the resume ends after it (a CI failure: the test
// server's stalled connection lived on because the reader's Flush of the
// message before the resume finished after it). A reader blocked in the
// Handler still puts the verdict off, as backpressure does.
func TestHeartbeatResumed(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return origin.Add(time.Duration(n) * time.Millisecond) }
	const interval, timeout = time.Hour, 50 * time.Millisecond
	const before readerProgress = 2 * 7 // seven messages handed over before the sleep
	for _, tc := range []struct {
		name     string
		lastRead time.Time
		progress readerProgress
		want     beat
		at       readerProgress // at the resume
	}{
		{"silent since", ms(0), before, beatDead, before},
		{"bytes arrived", ms(20), before, beatWait, before},
		{"a buffered message handed over", ms(0), before + 2, beatDead, before},
		{"the call under way ends", ms(0), before + 2, beatDead, before + 1},
		{"the call under way ends, then another", ms(0), before + 4, beatDead, before + 1},
		{"still blocked in the Handler", ms(0), before + 1, beatWait, before + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb := heartbeat{interval: interval, timeout: timeout, woke: ms(0)}
			if d := hb.resumed(ms(10), tc.at, writeProgress{}); d != timeout {
				t.Fatalf("resumed asks to come back after %v, want PingTimeout %v", d, timeout)
			}
			got, _ := hb.next(ms(10).Add(timeout), tc.lastRead, tc.progress, writeProgress{})
			if got != tc.want {
				t.Errorf("next = %s, want %s", beatNames[got], beatNames[tc.want])
			}
			if got == beatWait && hb.afterResume {
				// Answered or put off: the next silence is the ordinary
				// rule's again, where progress counts.
				t.Errorf("still waiting on the resume's probe after %s", beatNames[got])
			}
		})
	}
}
