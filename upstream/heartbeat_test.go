package upstream

import (
	"testing"
	"time"
)

var beatNames = map[beat]string{beatWait: "wait", beatProbe: "probe", beatDead: "dead"}

// TestHeartbeatNext checks each rule of heartbeat.next with plain timestamps:
// ms(n) is n milliseconds after an arbitrary origin.
func TestHeartbeatNext(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return origin.Add(time.Duration(n) * time.Millisecond) }
	const (
		interval = 100 * time.Millisecond
		timeout  = 50 * time.Millisecond
	)
	tests := []struct {
		name          string
		probeSent     time.Time // outstanding probe before the call, zero if none
		lastRead, now time.Time
		busy          bool
		want          beat
		wantWait      time.Duration
		wantProbeSent time.Time
	}{
		{name: "recent frame: wait out the rest of the interval",
			lastRead: ms(0), now: ms(40), want: beatWait, wantWait: 60 * time.Millisecond},
		{name: "frame just arrived: wait a full interval",
			lastRead: ms(0), now: ms(0), want: beatWait, wantWait: interval},
		{name: "silent for exactly the interval: probe",
			lastRead: ms(0), now: ms(100), want: beatProbe, wantWait: timeout, wantProbeSent: ms(100)},
		{name: "silent for longer: probe",
			lastRead: ms(0), now: ms(170), want: beatProbe, wantWait: timeout, wantProbeSent: ms(170)},
		{name: "probe outstanding, timeout not reached: wait the rest",
			probeSent: ms(100), lastRead: ms(0), now: ms(130), want: beatWait, wantWait: 20 * time.Millisecond, wantProbeSent: ms(100)},
		{name: "probe outstanding, timeout reached: dead",
			probeSent: ms(100), lastRead: ms(0), now: ms(150), want: beatDead, wantProbeSent: ms(100)},
		{name: "probe outstanding, long past timeout: dead",
			probeSent: ms(100), lastRead: ms(0), now: ms(900), want: beatDead, wantProbeSent: ms(100)},
		{name: "frame at the probe's instant does not answer it",
			probeSent: ms(100), lastRead: ms(100), now: ms(150), want: beatDead, wantProbeSent: ms(100)},
		{name: "frame after the probe: reset, wait from that frame",
			probeSent: ms(100), lastRead: ms(110), now: ms(150), want: beatWait, wantWait: 60 * time.Millisecond},
		{name: "frame after the probe, then silent again: probe anew",
			probeSent: ms(100), lastRead: ms(110), now: ms(210), want: beatProbe, wantWait: timeout, wantProbeSent: ms(210)},
		{name: "busy: no probe however long the silence",
			lastRead: ms(0), now: ms(1000), busy: true, want: beatWait, wantWait: interval},
		{name: "busy: an outstanding probe past its timeout is forgiven",
			probeSent: ms(100), lastRead: ms(0), now: ms(900), busy: true, want: beatWait, wantWait: interval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := heartbeat{interval: interval, timeout: timeout, probeSent: tt.probeSent}
			got, wait := h.next(tt.now, tt.lastRead, tt.busy)
			if got != tt.want {
				t.Errorf("action %s, want %s", beatNames[got], beatNames[tt.want])
			}
			if got != beatDead && wait != tt.wantWait {
				t.Errorf("wait %v, want %v", wait, tt.wantWait)
			}
			if !h.probeSent.Equal(tt.wantProbeSent) {
				t.Errorf("probeSent %v, want %v", h.probeSent.Sub(origin), tt.wantProbeSent.Sub(origin))
			}
		})
	}
}

// TestHeartbeatDetectionBound drives next the way the serve loop does, waking
// exactly when told, on a connection whose last frame arrived at various
// offsets from the start of the watch: death is declared exactly interval +
// timeout after the last frame, after exactly one probe.
func TestHeartbeatDetectionBound(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		interval = 15 * time.Second
		timeout  = 10 * time.Second
	)
	for _, lastFrame := range []time.Duration{0, time.Millisecond, 7 * time.Second, interval - 1} {
		h := heartbeat{interval: interval, timeout: timeout}
		lastRead := origin.Add(lastFrame)
		now := origin.Add(interval) // the serve loop's first wake-up
		probes := 0
		for range 10 {
			action, wait := h.next(now, lastRead, false)
			if action == beatProbe {
				probes++
			}
			if action == beatDead {
				break
			}
			now = now.Add(wait)
		}
		if got, want := now.Sub(lastRead), interval+timeout; got != want || probes != 1 {
			t.Errorf("last frame at +%v: dead %v after it with %d probes, want %v with 1", lastFrame, got, probes, want)
		}
	}
}

// TestHeartbeatAnsweredStaysAlive: a peer that answers every probe within the
// timeout is never declared dead, and is probed once per interval of silence.
func TestHeartbeatAnsweredStaysAlive(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		interval = 100 * time.Millisecond
		timeout  = 50 * time.Millisecond
		rtt      = 49 * time.Millisecond
	)
	h := heartbeat{interval: interval, timeout: timeout}
	lastRead, now := origin, origin.Add(interval)
	probes := 0
	for range 100 {
		action, wait := h.next(now, lastRead, false)
		switch action {
		case beatDead:
			t.Fatalf("declared dead at +%v although every probe was answered within %v", now.Sub(origin), rtt)
		case beatProbe:
			probes++
			lastRead = now.Add(rtt) // the pong arrives before the next wake-up
		}
		now = now.Add(wait)
	}
	elapsed := now.Sub(origin)
	if most := int(elapsed / interval); probes > most || probes == 0 {
		t.Errorf("%d probes in %v, want between 1 and %d (one per interval of silence)", probes, elapsed, most)
	}
}

// TestHeartbeatLateWakeUp: after the process was stopped past the probe's
// timeout, the late wake-up looks again shortly instead of declaring the
// connection dead; frames read meanwhile keep it alive, and a connection that
// is really silent is declared dead at the re-check.
func TestHeartbeatLateWakeUp(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		interval = 100 * time.Millisecond
		timeout  = 100 * time.Millisecond
	)
	for _, answered := range []bool{true, false} {
		h := heartbeat{interval: interval, timeout: timeout}
		lastRead := origin
		now := origin.Add(interval)
		if b, _ := h.next(now, lastRead, false); b != beatProbe {
			t.Fatalf("first wake-up = %v, want a probe", b)
		}
		now = now.Add(2 * time.Second) // frozen well past the timeout
		b, wait := h.next(now, lastRead, false)
		if b != beatWait || wait <= 0 || wait > timeout {
			t.Fatalf("late wake-up = %v after %v, want a short re-check", b, wait)
		}
		if answered {
			lastRead = now.Add(time.Millisecond) // the reader drains the pong
		}
		now = now.Add(wait)
		b, _ = h.next(now, lastRead, false)
		if answered && b == beatDead {
			t.Errorf("declared dead although the pong was read during the re-check")
		}
		if !answered && b != beatDead {
			t.Errorf("re-check of a silent connection = %v, want dead", b)
		}
	}
}
