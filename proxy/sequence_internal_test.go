package proxy

import (
	"slices"
	"testing"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/template"
)

func TestIsPlainKey(t *testing.T) {
	for p, want := range map[string]bool{
		"seq": true, "channel_id": true, "séq": true, "data.seq": false, "params.0": false,
		"0": false, "a|b": false, "#": false, "a*": false, `a\.b`: false, "@this": false,
	} {
		if got := isPlainKey(p); got != want {
			t.Errorf("isPlainKey(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestGapPolicyText(t *testing.T) {
	for _, p := range []GapPolicy{GapClose, GapSkip, GapNotify} {
		var back GapPolicy
		if err := back.UnmarshalText([]byte(p.String())); err != nil || back != p {
			t.Errorf("%v round trip: %v, %v", p, back, err)
		}
	}
	var p GapPolicy
	if err := p.UnmarshalText([]byte("drop")); err == nil {
		t.Error("drop accepted as a gap policy")
	}
	if s := GapPolicy(7).String(); s != "GapPolicy(7)" {
		t.Errorf("GapPolicy(7) = %q", s)
	}
}

// The fetch backoff grows, but a few retries always fit in the timeout.
func TestFetchBackoff(t *testing.T) {
	r := newSeqRules(Sequences{SeqPath: path(t, "seq"), GapTimeout: time.Second})
	want := []time.Duration{100, 200, 250, 250}
	for i, w := range want {
		if got := r.fetchBackoff(i + 1); got != w*time.Millisecond {
			t.Errorf("fetchBackoff(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if d := newSeqRules(Sequences{}); d.GapTimeout != DefaultGapTimeout || d.HoldMaxBytes != DefaultHoldMaxBytes || d.on {
		t.Errorf("zero Sequences: timeout %v, hold %d, on %v", d.GapTimeout, d.HoldMaxBytes, d.on)
	}
}

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
			s := Sequences{SeqPath: path(t, "seq")}
			if tc.capture {
				s.SessionMatch, s.SessionPath = compile(t, `{"t":"welcome"}`), path(t, "session")
			}
			if tc.streams {
				s.StreamPath = path(t, "channel")
			}
			r := newSeqRules(s)
			var sq seqState
			sq.init(1 << 20)
			for _, c := range tc.captures {
				sq.capture(c.gen, c.id)
			}
			for _, d := range tc.delivered {
				sq.tracker.Offer(d.stream, buffer.SeqMessage{Seq: d.seq, Message: buffer.Message{Data: []byte("x")}}, func(buffer.SeqMessage) {})
			}
			got := sq.resumeData(tc.gen, &r)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("resumeData = %+v, want %+v", got, tc.want)
			}
			for _, d := range got {
				if sq.resumed[d.Stream] != tc.gen || !sq.resumeInFlight(d.Stream) {
					t.Errorf("stream %q not marked as resumed on %d", d.Stream, tc.gen)
				}
			}
		})
	}
}

// Without a sequence number path nothing is sequenced, whatever else is
// set: the session forwards messages without reading them for sequencing.
func TestSequencesOffWithoutSeqPath(t *testing.T) {
	r := newRuleSet(Rules{Sequences: Sequences{
		StreamPath: path(t, "channel"), SessionMatch: compile(t, `{"t":"welcome"}`), SessionPath: path(t, "s"),
	}})
	if r.seq.on || r.seq.fill {
		t.Fatalf("sequencing on without TETHER_SEQ_PATH: on %v, fill %v", r.seq.on, r.seq.fill)
	}
	if newRuleSet(Rules{}).seq.fields.n != 0 {
		t.Fatal("zero Rules read fields")
	}
}

// BenchmarkClassify reads a 1 KiB message for the DESIGN.md example's rules,
// with the number near the end: one walk of the top level against a lookup
// per path.
func BenchmarkClassify(b *testing.B) {
	msg := []byte(`{"t":"event","channel":"a","data":{"px":"` + string(make([]byte, 900)) + `"},"session":"S","seq":123456}`)
	for i := range msg {
		if msg[i] == 0 {
			msg[i] = 'x'
		}
	}
	for _, tc := range []struct{ name, seq string }{{"one walk", "seq"}, {"lookups", "data|@this.seq"}} {
		b.Run(tc.name, func(b *testing.B) {
			r := newSeqRules(Sequences{
				SeqPath: path(b, "seq"), StreamPath: path(b, "channel"),
				SessionMatch: compile(b, `{"t":"welcome"}`), SessionPath: path(b, "session"),
				ResyncMatch: compile(b, `{"t":"welcome","resync":true}`), ResyncSeqPath: path(b, tc.seq),
			})
			b.ReportAllocs()
			for b.Loop() {
				if in := r.classify(msg); !in.hasSeq {
					b.Fatal("no number")
				}
			}
		})
	}
}
