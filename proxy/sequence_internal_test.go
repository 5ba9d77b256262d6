package proxy

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/rules"
	"github.com/tetherproxy/tether/internal/template"
)

// The one-pass reader finds what a lookup per path finds, first occurrence
// of a repeated key included, whether it walks the top level or falls back
// to gjson paths.
func TestFieldReaderMatchesLookups(t *testing.T) {
	msgs := []string{
		`{"seq":7,"channel":"a","session":"S","snap":9}`,
		`{"channel":"b","data":{"seq":1,"channel":"x"},"seq":8}`,
		`{"seq":1,"seq":2,"channel":"first","channel":"second"}`,
		`{"s\u0065q":12,"ch\u0061nnel":"esc"}`,
		`{"nested":[1,{"seq":3}],"other":"seq"}`,
		`  {"seq":-9223372036854775808}`,
		`{"seq":"7","channel":7}`,
		`[{"seq":1}]`,
		`"seq"`,
		`{}`,
		``,
	}
	sets := [][]string{
		{"seq", "channel", "session", "snap"},
		{"seq", "", "", ""},
		{"data.seq", "data.channel", "session", "seq"},
		{"seq", "channel", "", "seq"},
	}
	for _, set := range sets {
		var paths []string
		r := newFieldReader(optPath(t, set[0]), optPath(t, set[1]), optPath(t, set[2]), optPath(t, set[3]))
		wantFlat := !slices.Contains(set, "data.seq")
		if r.flat != wantFlat {
			t.Errorf("paths %q: flat = %v, want %v", set, r.flat, wantFlat)
		}
		paths = append(paths, set...)
		for _, msg := range msgs {
			var got [numFields]gjson.Result
			r.read([]byte(msg), &got)
			for i, p := range paths {
				var want gjson.Result
				if p != "" {
					want = gjson.Get(msg, p)
				}
				if got[i].Raw != want.Raw || got[i].Type != want.Type {
					t.Errorf("paths %q, message %s: field %d (%q) = %q, want %q", set, msg, i, p, got[i].Raw, want.Raw)
				}
			}
		}
	}
}

func optPath(t *testing.T, p string) (r rules.Path) {
	if p == "" {
		return r
	}
	return path(t, p)
}

// FuzzFieldReader checks the walk against gjson lookups on any valid JSON.
func FuzzFieldReader(f *testing.F) {
	f.Add(`{"seq":1,"channel":"a"}`)
	f.Add(`{"a":{"seq":2},"seq":3,"seq":4}`)
	f.Add(`{"ch\u0061nnel":"x","session":null}`)
	f.Add(`[1,2]`)
	r := newFieldReader(path(f, "seq"), path(f, "channel"), path(f, "session"), path(f, "snapshot"))
	keys := []string{"seq", "channel", "session", "snapshot"}
	f.Fuzz(func(t *testing.T, msg string) {
		if !json.Valid([]byte(msg)) {
			return
		}
		var got [numFields]gjson.Result
		r.read([]byte(msg), &got)
		for i, k := range keys {
			if want := gjson.Get(msg, k); got[i].Raw != want.Raw {
				t.Fatalf("%s: %s = %q, want %q", msg, k, got[i].Raw, want.Raw)
			}
		}
	})
}

func TestSeqNumber(t *testing.T) {
	tests := []struct {
		msg  string
		want int64
		ok   bool
	}{
		{`{"seq":42}`, 42, true},
		{`{"seq":-7}`, -7, true},
		{`{"seq":42.0}`, 42, true},
		{`{"seq":4.2e1}`, 42, true},
		{`{"seq":9007199254740993}`, 9007199254740993, true},
		{`{"seq":42.5}`, 0, false},
		{`{"seq":1e19}`, 0, false},
		{`{"seq":"42"}`, 0, false},
		{`{"seq":null}`, 0, false},
		{`{}`, 0, false},
	}
	p := path(t, "seq")
	for _, tc := range tests {
		got, ok := seqNumber(gjson.Get(tc.msg, "seq"), p, []byte(tc.msg))
		if got != tc.want || ok != tc.ok {
			t.Errorf("seqNumber(%s) = %d, %v, want %d, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}

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
