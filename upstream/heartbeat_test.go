package upstream

import (
	"fmt"
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
	const (
		idle readerProgress = 0 // no message handed over since the previous wake-up
		busy readerProgress = 1 // in Handler.Message, none finished since
		done readerProgress = 2 // one message handed over since, not busy now
	)
	tests := []struct {
		name          string
		probeSent     time.Time // outstanding probe before the call, zero if none
		woke          time.Time // the previous wake-up
		lastRead, now time.Time
		progress      readerProgress
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
			lastRead: ms(0), now: ms(1000), progress: busy, want: beatWait, wantWait: interval},
		{name: "busy: an outstanding probe past its timeout is forgiven",
			probeSent: ms(100), lastRead: ms(0), now: ms(900), progress: busy, want: beatWait, wantWait: interval},
		{name: "moved since the previous wake-up: counts as a frame then",
			woke: ms(50), lastRead: ms(0), now: ms(100), progress: done, want: beatWait, wantWait: 50 * time.Millisecond},
		{name: "moved, but a later frame counts from itself",
			woke: ms(50), lastRead: ms(70), now: ms(100), progress: done, want: beatWait, wantWait: 70 * time.Millisecond},
		{name: "moved since the probe: answered, however old the last frame",
			probeSent: ms(100), woke: ms(100), lastRead: ms(0), now: ms(150), progress: done,
			want: beatWait, wantWait: 50 * time.Millisecond},
		{name: "moved, then silent for the interval since that wake-up: probe",
			woke: ms(100), lastRead: ms(0), now: ms(200), progress: done, want: beatProbe, wantWait: timeout, wantProbeSent: ms(200)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := heartbeat{interval: interval, timeout: timeout, probeSent: tt.probeSent, woke: tt.woke}
			got, wait := h.next(tt.now, tt.lastRead, tt.progress, writeProgress{})
			if got != tt.want {
				t.Errorf("action %s, want %s", beatNames[got], beatNames[tt.want])
			}
			if got != beatDead && wait != tt.wantWait {
				t.Errorf("wait %v, want %v", wait, tt.wantWait)
			}
			if !h.probeSent.Equal(tt.wantProbeSent) {
				t.Errorf("probeSent %v, want %v", h.probeSent.Sub(origin), tt.wantProbeSent.Sub(origin))
			}
			if h.seen != tt.progress.count() || !h.woke.Equal(tt.now) {
				t.Errorf("remembered progress %d at %v, want %d at %v",
					h.seen, h.woke.Sub(origin), tt.progress.count(), tt.now.Sub(origin))
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
			action, wait := h.next(now, lastRead, 0, writeProgress{})
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
		action, wait := h.next(now, lastRead, 0, writeProgress{})
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
		if b, _ := h.next(now, lastRead, 0, writeProgress{}); b != beatProbe {
			t.Fatalf("first wake-up = %v, want a probe", b)
		}
		now = now.Add(2 * time.Second) // frozen well past the timeout
		b, wait := h.next(now, lastRead, 0, writeProgress{})
		if b != beatWait || wait <= 0 || wait > timeout {
			t.Fatalf("late wake-up = %v after %v, want a short re-check", b, wait)
		}
		if answered {
			lastRead = now.Add(time.Millisecond) // the reader drains the pong
		}
		now = now.Add(wait)
		b, _ = h.next(now, lastRead, 0, writeProgress{})
		if answered && b == beatDead {
			t.Errorf("declared dead although the pong was read during the re-check")
		}
		if !answered && b != beatDead {
			t.Errorf("re-check of a silent connection = %v, want dead", b)
		}
	}
}

// TestHeartbeatReaderBehind: a wake-up on time, past the probe's timeout,
// while bytes wait unread in the socket finds the reader behind, not the
// connection silent, and looks again shortly; once the reader has drained
// them (the pong among them) the connection lives on, and one with nothing
// unread and still no frame is declared dead at the re-check. The socket is
// asked only then: a wake-up that is not about to declare death does not.
// The writer likewise: frames waiting unwritten with the kernel's send
// queue empty (the probe may be among them) find the writer behind.
func TestHeartbeatReaderBehind(t *testing.T) {
	for _, side := range []string{"reader", "writer"} {
		for _, answered := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/answered=%v", side, answered), func(t *testing.T) {
				checkBehind(t, side, answered)
			})
		}
	}
}

// checkBehind runs TestHeartbeatReaderBehind with side ("reader" or
// "writer") behind at the timeout, and a frame arriving during the re-check
// when answered.
func checkBehind(t *testing.T, side string, answered bool) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		interval = 100 * time.Millisecond
		timeout  = 100 * time.Millisecond
	)
	behind, asked := true, 0
	ask := func() bool { asked++; return behind }
	never := func() bool { return false }
	h := heartbeat{interval: interval, timeout: timeout, unread: ask, unwritten: never}
	if side == "writer" {
		h.unread, h.unwritten = never, ask
	}
	lastRead := origin
	now := origin.Add(interval)
	if b, _ := h.next(now, lastRead, 0, writeProgress{}); b != beatProbe || asked != 0 {
		t.Fatalf("first wake-up = %v, socket asked %d times; want a probe, not asked", b, asked)
	}
	now = now.Add(timeout) // on time
	b, wait := h.next(now, lastRead, 0, writeProgress{})
	if b != beatWait || wait <= 0 || wait > timeout || asked != 1 {
		t.Fatalf("wake-up at the timeout with the %s behind = %v after %v, socket asked %d times; want a short re-check, asked once",
			side, b, wait, asked)
	}
	behind = false // it ran
	if answered {
		lastRead = now.Add(time.Millisecond)
	}
	now = now.Add(wait)
	b, _ = h.next(now, lastRead, 0, writeProgress{})
	if answered && b == beatDead {
		t.Errorf("declared dead although a frame arrived during the re-check")
	}
	if !answered && b != beatDead {
		t.Errorf("re-check with the %s caught up and no frame = %v, want dead", side, b)
	}
}

// TestHeartbeatSlowDrain: a reader works through a backlog it read in one go,
// each message blocking it on a slow app, and no byte arrives meanwhile (the
// peer is gone, or its answers wait behind the backlog). Whether the wake-ups
// find the reader busy or between two messages, the connection is declared
// dead only after a probe followed by a whole PingTimeout in which the reader
// neither handed a message over nor was in the middle of one, that is waited
// on a silent socket; and once the reader stops for good, within PingInterval
// + PingTimeout of its last message.
func TestHeartbeatSlowDrain(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		interval = 100 * time.Millisecond
		timeout  = 50 * time.Millisecond
		phases   = 7
	)
	for _, period := range []time.Duration{3 * time.Millisecond, 40 * time.Millisecond, 49 * time.Millisecond,
		51 * time.Millisecond, 120 * time.Millisecond, 400 * time.Millisecond} {
		for ph := range phases {
			// The phase moves the wake-ups across the quarter of each period
			// the reader spends between two messages.
			r := drainReader{start: origin.Add(time.Duration(ph) * period / phases), period: period, messages: 40}
			name := fmt.Sprintf("period %v phase %d/%d", period, ph, phases)
			checkDrain(t, name, origin, r, interval, timeout)
		}
	}
}

// drainReader is in Handler.Message during the first three quarters of each
// period from start, for messages periods.
type drainReader struct {
	start    time.Time
	period   time.Duration
	messages int64
}

func (r drainReader) busyFor() time.Duration { return r.period - r.period/4 }

func (r drainReader) lastDone() time.Time {
	return r.start.Add(time.Duration(r.messages-1)*r.period + r.busyFor())
}

// progressAt is the reader's progress word at instant at.
func (r drainReader) progressAt(at time.Time) readerProgress {
	if at.Before(r.start) {
		return 0
	}
	i := int64(at.Sub(r.start) / r.period)
	if i >= r.messages {
		return readerProgress(2 * r.messages)
	}
	if at.Sub(r.start)-time.Duration(i)*r.period < r.busyFor() {
		return readerProgress(2*i + 1)
	}
	return readerProgress(2 * (i + 1))
}

// waitedBetween reports whether the reader was never in Handler.Message
// between a and b, bounds included.
func (r drainReader) waitedBetween(a, b time.Time) bool {
	for i := range r.messages {
		from := r.start.Add(time.Duration(i) * r.period)
		if !from.After(b) && from.Add(r.busyFor()).After(a) {
			return false
		}
	}
	return true
}

// checkDrain drives a heartbeat the way the serve loop does over r, with no
// bytes arriving after origin.
func checkDrain(t *testing.T, name string, origin time.Time, r drainReader, interval, timeout time.Duration) {
	t.Helper()
	h := heartbeat{interval: interval, timeout: timeout, woke: origin}
	now := origin.Add(interval) // the serve loop's first wake-up
	var probeAt time.Time
	for range 10000 {
		action, wait := h.next(now, origin, r.progressAt(now), writeProgress{})
		switch action {
		case beatProbe:
			probeAt = now
		case beatDead:
			switch {
			case now.Sub(probeAt) < timeout || !r.waitedBetween(probeAt, now):
				t.Errorf("%s: dead at +%v, after a probe at +%v, though the reader was busy in between",
					name, now.Sub(origin), probeAt.Sub(origin))
			case now.After(r.lastDone()) && now.Sub(r.lastDone()) > interval+timeout:
				t.Errorf("%s: dead %v after the last message, want within %v", name, now.Sub(r.lastDone()), interval+timeout)
			}
			return
		}
		now = now.Add(wait)
	}
	t.Errorf("%s: never declared dead after the reader stopped", name)
}

// TestHeartbeatCadence: on an idle connection whose peer answers every probe
// at once, a probe goes out every PingInterval of silence, however much
// longer PingTimeout is: an idle connection is kept alive as often as
// configured, which NAT and load-balancer idle timeouts depend on.
func TestHeartbeatCadence(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const rtt = time.Millisecond
	for _, c := range []struct{ interval, timeout time.Duration }{
		{100 * time.Millisecond, 5 * time.Second},
		{500 * time.Millisecond, 2 * time.Second},
		{100 * time.Millisecond, 100 * time.Millisecond},
		{time.Second, 100 * time.Millisecond},
	} {
		h := heartbeat{interval: c.interval, timeout: c.timeout, woke: origin}
		lastRead, now := origin, origin.Add(c.interval)
		var probes []time.Time
		for now.Sub(origin) < 30*c.interval {
			action, wait := h.next(now, lastRead, 0, writeProgress{})
			switch action {
			case beatDead:
				t.Fatalf("%v/%v: declared dead at +%v although every probe was answered", c.interval, c.timeout, now.Sub(origin))
			case beatProbe:
				probes = append(probes, now)
				lastRead = now.Add(rtt) // the pong, before the next wake-up
			}
			now = now.Add(wait)
		}
		for i := 1; i < len(probes); i++ {
			if gap := probes[i].Sub(probes[i-1]); gap > c.interval+rtt {
				t.Errorf("%v/%v: probes %d and %d %v apart, want every PingInterval of silence (%v)",
					c.interval, c.timeout, i-1, i, gap, c.interval+rtt)
				break
			}
		}
		if len(probes) < 25 {
			t.Errorf("%v/%v: %d probes in %v, want one per interval of silence", c.interval, c.timeout, len(probes), 30*c.interval)
		}
	}
}

// TestHeartbeatDetectionAfterAnswer: a peer that answers a probe, or sends
// anything while a probe waits, and then goes silent for good is declared
// dead within PingInterval + PingTimeout of that last frame, wherever in
// the probe's wait it arrived.
func TestHeartbeatDetectionAfterAnswer(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct{ interval, timeout time.Duration }{
		{500 * time.Millisecond, 2 * time.Second},
		{100 * time.Millisecond, 5 * time.Second},
		{15 * time.Second, 10 * time.Second},
		{time.Second, 100 * time.Millisecond},
	} {
		for _, after := range []time.Duration{time.Millisecond, c.timeout / 3, c.timeout / 2, c.timeout - time.Millisecond} {
			h := heartbeat{interval: c.interval, timeout: c.timeout, woke: origin}
			probe := origin.Add(c.interval) // the first wake-up probes
			if b, _ := h.next(probe, origin, 0, writeProgress{}); b != beatProbe {
				t.Fatalf("first wake-up = %s, want probe", beatNames[b])
			}
			lastRead := probe.Add(after) // the last frame the peer ever sends
			now := probe.Add(h.due.Sub(probe))
			for range 10000 {
				action, wait := h.next(now, lastRead, 0, writeProgress{})
				if action == beatDead {
					break
				}
				now = now.Add(wait)
			}
			if got, bound := now.Sub(lastRead), c.interval+c.timeout; got > bound {
				t.Errorf("%v/%v, last frame %v after the probe: dead %v after it, want ≤ %v",
					c.interval, c.timeout, after, got, bound)
			}
		}
	}
}

// TestHeartbeatWriteProgress: acknowledgements behind a backlog that waited
// at the previous wake-up count as life, and keep a probe queued behind the
// backlog from timing out; acknowledgements without a backlog (of the
// probes themselves, by a hung server's kernel) do not, nor does a count
// that stands still under a backlog (a blackhole), nor one the system does
// not give.
func TestHeartbeatWriteProgress(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		interval = 100 * time.Millisecond
		timeout  = 100 * time.Millisecond
	)
	tests := []struct {
		name     string
		progress func(i int) writeProgress // at wake-up i
		dead     bool
	}{
		{"acknowledged behind a backlog", func(i int) writeProgress {
			return writeProgress{acked: uint64(1000 * i), backlog: true, ok: true}
		}, false},
		{"acknowledged, the backlog gone for good", func(i int) writeProgress {
			return writeProgress{acked: uint64(1000 * i), backlog: i < 2, ok: true}
		}, true},
		{"acknowledged without a backlog", func(i int) writeProgress {
			return writeProgress{acked: uint64(6 * i), ok: true}
		}, true},
		{"a backlog nothing is acknowledged of", func(int) writeProgress {
			return writeProgress{acked: 5000, backlog: true, ok: true}
		}, true},
		{"no word from the system", func(i int) writeProgress {
			return writeProgress{acked: uint64(1000 * i), backlog: true}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := heartbeat{interval: interval, timeout: timeout, woke: origin}
			now, dead := origin.Add(interval), false
			for i := 0; i < 100 && !dead; i++ {
				action, wait := h.next(now, origin, 0, tt.progress(i)) // nothing read after origin
				dead = action == beatDead
				now = now.Add(wait)
			}
			if dead != tt.dead {
				t.Errorf("declared dead: %v, want %v", dead, tt.dead)
			}
		})
	}
}

// TestHeartbeatBehindIsBounded: a side that stays behind (bytes unread, or
// frames unwritten with the kernel's queue empty) puts the verdict off at
// each re-check, on time, but only for maxDeferral: a reader or writer that
// never catches up is stuck, and the connection is declared dead then, not
// kept for ever.
func TestHeartbeatBehindIsBounded(t *testing.T) {
	origin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, timeout := range []time.Duration{100 * time.Millisecond, 3 * time.Second} {
		t.Run(timeout.String(), func(t *testing.T) {
			always := func() bool { return true }
			h := heartbeat{interval: timeout, timeout: timeout, unread: always}
			bound := max(4*timeout, minDeferral)
			now := origin.Add(timeout)
			if b, _ := h.next(now, origin, 0, writeProgress{}); b != beatProbe {
				t.Fatalf("first wake-up = %v, want a probe", b)
			}
			now = now.Add(timeout)
			first := now
			for {
				b, wait := h.next(now, origin, 0, writeProgress{})
				since := now.Sub(first)
				if b == beatDead {
					if since < bound {
						t.Fatalf("declared dead %v after the first deferral, want %v of the side behind", since, bound)
					}
					if since > bound+h.recheck() {
						t.Fatalf("declared dead %v after the first deferral, want within %v", since, bound+h.recheck())
					}
					return
				}
				if b != beatWait || wait != h.recheck() {
					t.Fatalf("%v into the deferral: %v after %v, want a re-check after %v", since, b, wait, h.recheck())
				}
				now = now.Add(wait) // on time: not late
			}
		})
	}
}
