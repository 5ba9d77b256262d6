package sequence

import (
	"slices"
	"testing"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/template"
)

// What a resume on a new connection is rendered with, and when there is
// nothing to resume.
func TestResumeData(t *testing.T) {
	type delivered struct {
		stream string
		seq    int64
	}
	type capture struct {
		gen uint64
		id  string
	}
	tests := []struct {
		name      string
		capture   bool // TETHER_SESSION_MATCH set
		streams   bool // TETHER_STREAM_PATH set
		captures  []capture
		delivered []delivered
		gen       uint64
		want      []template.Resume
	}{
		{name: "first connection: nothing known", gen: 1},
		{name: "session not captured yet", capture: true, delivered: []delivered{{"", 5}}, gen: 2},
		{name: "one stream", capture: true, captures: []capture{{1, "S"}}, delivered: []delivered{{"", 41}}, gen: 2,
			want: []template.Resume{{Session: "S", LastSeq: 41}}},
		{name: "session but nothing received: after 0", capture: true, captures: []capture{{1, "S"}}, gen: 2,
			want: []template.Resume{{Session: "S"}}},
		{name: "no session rule, a stream known", delivered: []delivered{{"", 3}}, gen: 2,
			want: []template.Resume{{LastSeq: 3}}},
		{name: "per stream, in first-seen order", streams: true, delivered: []delivered{{"b", 4}, {"a", 9}, {"b", 5}}, gen: 3,
			want: []template.Resume{{Stream: "b", LastSeq: 5}, {Stream: "a", LastSeq: 9}}},
		{name: "per stream, none known", streams: true, capture: true, captures: []capture{{1, "S"}}, gen: 2},
		{name: "a fresh session greeting the new connection is not resumed", capture: true,
			captures: []capture{{1, "S"}, {2, "fresh"}}, delivered: []delivered{{"", 7}}, gen: 2,
			want: []template.Resume{{Session: "S", LastSeq: 7}}},
		{name: "the resumed session answered on the previous connection", capture: true,
			captures: []capture{{1, "S"}, {2, "fresh"}, {2, "S"}}, delivered: []delivered{{"", 7}}, gen: 3,
			want: []template.Resume{{Session: "S", LastSeq: 7}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{CaptureSession: tc.capture, PerStream: tc.streams}, false)
			s := h.s
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, c := range tc.captures {
				s.captureLocked(c.gen, c.id)
			}
			for _, d := range tc.delivered {
				s.trackerLocked().Offer(d.stream, buffer.SeqMessage{Seq: d.seq, Message: buffer.Message{Data: []byte("x")}}, func(buffer.SeqMessage) {})
			}
			got := s.resumeDataLocked(tc.gen)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("resumeData = %+v, want %+v", got, tc.want)
			}
			for _, d := range got {
				if s.resumed[d.Stream] != tc.gen || !s.resumeInFlightLocked(d.Stream) {
					t.Errorf("stream %q not marked as resumed on %d", d.Stream, tc.gen)
				}
			}
		})
	}
}

// ResumeMessages renders TETHER_RESUME_MESSAGE per known stream, and none
// without the variable.
func TestResumeMessages(t *testing.T) {
	const text = `{"t":"resume","session":{{json .Session}},"stream":{{json .Stream}},"after":{{.LastSeq}}}`
	h := newHarness(t, Config{Resume: mustResume(t, text), PerStream: true}, false)
	h.s.Offer(1, msgData("welcome"), false, Fields{Session: "S", Captured: true})
	h.burst(1, "a/4", "b/7", "a/5")
	got := h.s.ResumeMessages(2)
	want := []Resume{
		{Stream: "a", LastSeq: 5, Message: []byte(`{"t":"resume","session":"S","stream":"a","after":5}`)},
		{Stream: "b", LastSeq: 7, Message: []byte(`{"t":"resume","session":"S","stream":"b","after":7}`)},
	}
	if !slices.EqualFunc(got, want, func(a, b Resume) bool {
		return a.Stream == b.Stream && a.LastSeq == b.LastSeq && string(a.Message) == string(b.Message)
	}) {
		t.Fatalf("ResumeMessages(2) = %+v, want %+v", got, want)
	}
	if m := newHarness(t, Config{PerStream: true}, false).s.ResumeMessages(2); m != nil {
		t.Fatalf("ResumeMessages without TETHER_RESUME_MESSAGE = %+v", m)
	}
}

// The connection a resume was sent on carrying its stream on where it
// stopped is a recovery by resume, counted once.
func TestResumeAnswered(t *testing.T) {
	h := newHarness(t, Config{Resume: mustResume(t, `{"after":{{.LastSeq}}}`)}, false)
	h.burst(1, msg("", 1), msg("", 2))
	h.s.ResumeMessages(2)
	h.burst(2, msg("", 2), msg("", 3), msg("", 4)) // the replay overlaps by one
	h.expectRecovered(map[string]int{labels.RecoveryResume: 1})
	if n := h.logged("stream resumed"); n != 1 {
		t.Fatalf("%d stream resumed lines, want 1", n)
	}
	h.expectGot(msg("", 1), msg("", 2), msg("", 3), msg("", 4))
}

// A gap on a stream a resume was asked for is left to the resumed replay
// for half the timeout, then fetched; a gap the replay fills counts as a
// recovery by resume.
func TestResumeDefersCatchUp(t *testing.T) {
	resume := mustResume(t, `{"after":{{.LastSeq}}}`)
	t.Run("fetched after half the timeout", func(t *testing.T) {
		h := newHarness(t, Config{Resume: resume, Policy: PolicySkip}, true)
		h.burst(1, msg("", 1))
		h.s.ResumeMessages(2)
		h.burst(2, msg("", 3))
		h.clock.Advance(testTimeout/2 - time.Nanosecond)
		if h.fetching("") {
			t.Fatal("gap fetched before half the timeout while a resume may fill it")
		}
		h.clock.Advance(time.Nanosecond)
		c := h.nextFetch()
		if c.req.Gap.From != 2 || c.req.Gap.To != 2 || !c.req.Deadline.Equal(h.start.Add(testTimeout)) {
			t.Fatalf("catch-up %+v, want 2-2 by the gap's deadline", c.req)
		}
		h.reply(c, msg("", 2))
		h.expectGot(msg("", 1), msg("", 2), msg("", 3))
		h.expectRecovered(map[string]int{labels.RecoveryHTTP: 1})
	})
	t.Run("filled by the replay", func(t *testing.T) {
		h := newHarness(t, Config{Resume: resume, Policy: PolicySkip}, true)
		h.burst(1, msg("", 1), msg("", 3)) // gap 2, fetched at once: no resume yet
		c := h.nextFetch()
		h.s.ResumeMessages(2)
		h.burst(2, msg("", 2))
		select {
		case <-c.ctx.Done():
		default:
			t.Fatal("catch-up not cancelled once the replay filled the gap")
		}
		h.stop() // the cancelled catch-up's goroutine ends its turn
		h.expectGot(msg("", 1), msg("", 2), msg("", 3))
		h.expectRecovered(map[string]int{labels.RecoveryResume: 1})
		h.expectGaps(map[string]int{labels.GapFilled: 1})
	})
	t.Run("fetched at once when the connection is lost", func(t *testing.T) {
		h := newHarness(t, Config{Resume: resume, Policy: PolicySkip}, true)
		h.burst(1, msg("", 1))
		h.s.ResumeMessages(2)
		h.burst(2, msg("", 3))
		h.clock.Advance(time.Second)
		h.s.Lost(2)
		c := h.nextFetch()
		if !c.req.Deadline.Equal(h.start.Add(testTimeout)) {
			t.Fatalf("catch-up deadline %v after the start, want the gap's, %v", c.req.Deadline.Sub(h.start), testTimeout)
		}
		// The timer now runs to the gap's deadline, not to the deferral's end.
		h.clock.Advance(testTimeout - time.Second - time.Nanosecond)
		h.expectGot(msg("", 1))
		h.clock.Advance(time.Nanosecond) // 2 skipped: the catch-up is cancelled
		h.stop()
		h.expectGot(msg("", 1), msg("", 3))
	})
}

// Position is a copy of where the streams stand: later messages do not
// change it.
func TestPosition(t *testing.T) {
	h := newHarness(t, Config{PerStream: true}, false)
	if last, ok := h.s.Position().LastSeq("a"); ok || last != 0 || h.s.Position().Session() != "" {
		t.Fatalf("Position before any message: %d %v %q", last, ok, h.s.Position().Session())
	}
	h.s.Offer(1, msgData("welcome"), false, Fields{Session: "S", Captured: true})
	h.burst(1, "a/4", "b/7", "a/5")
	p := h.s.Position()
	h.burst(1, "a/6")
	if last, ok := p.LastSeq("a"); !ok || last != 5 {
		t.Fatalf("Position.LastSeq(a) = %d, %v; want 5, true", last, ok)
	}
	if last, ok := p.LastSeq("b"); !ok || last != 7 || p.Session() != "S" {
		t.Fatalf("Position: b at %d (%v), session %q; want 7 and S", last, ok, p.Session())
	}
	if _, ok := p.LastSeq("c"); ok {
		t.Fatal("Position knows a stream never seen")
	}
}
