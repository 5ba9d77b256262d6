package sse

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAppendEvent(t *testing.T) {
	cases := []struct {
		name   string
		ev     Event
		withID bool
		want   string
	}{
		{"data only", Event{Data: "a"}, false, "data: a\n\n"},
		{"default type omitted", Event{Type: "message", Data: "a"}, false, "data: a\n\n"},
		{"named", Event{Type: "add", Data: "a"}, false, "event: add\ndata: a\n\n"},
		{"with id", Event{Data: "a", ID: "7"}, true, "id: 7\ndata: a\n\n"},
		{"id not asked for", Event{Data: "a", ID: "7"}, false, "data: a\n\n"},
		{"empty id resets", Event{Data: "a"}, true, "id:\ndata: a\n\n"},
		{"empty data still dispatches", Event{}, false, "data:\n\n"},
		{"LF splits data", Event{Data: "a\nb"}, false, "data: a\ndata: b\n\n"},
		{"CRLF splits data once", Event{Data: "a\r\nb"}, false, "data: a\ndata: b\n\n"},
		{"CR splits data", Event{Data: "a\rb"}, false, "data: a\ndata: b\n\n"},
		{"LF CR is two breaks", Event{Data: "a\n\rb"}, false, "data: a\ndata:\ndata: b\n\n"},
		{"trailing newline kept", Event{Data: "a\n"}, false, "data: a\ndata:\n\n"},
		{"single newline", Event{Data: "\n"}, false, "data:\ndata:\n\n"},
		{"leading space kept", Event{Data: " a", ID: " x", Type: " t"}, true, "id:  x\nevent:  t\ndata:  a\n\n"},
		{"colon in data", Event{Data: ": not a comment"}, false, "data: : not a comment\n\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendEvent([]byte("prefix:"), tc.ev, tc.withID)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix:"+tc.want {
				t.Errorf("got %q, want %q", got, "prefix:"+tc.want)
			}
		})
	}
}

func TestAppendEventRejects(t *testing.T) {
	cases := []struct {
		name string
		ev   Event
		want error
	}{
		{"LF in type", Event{Type: "a\nb"}, ErrLineBreak},
		{"CR in type", Event{Type: "a\rb"}, ErrLineBreak},
		{"LF in id", Event{ID: "1\n2"}, ErrLineBreak},
		{"CR in id", Event{ID: "1\r"}, ErrLineBreak},
		{"NUL in id", Event{ID: "1\x002"}, ErrNULInID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendEvent([]byte("x"), tc.ev, true)
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if string(got) != "x" {
				t.Errorf("dst = %q, want it untouched", got)
			}
		})
	}
}

func TestAppendCommentAndRetry(t *testing.T) {
	for text, want := range map[string]string{
		"":          ":\n",
		"ping":      ": ping\n",
		" x":        ":  x\n",
		"a\nb\r\nc": ": a\n: b\n: c\n",
		"a\n":       ": a\n:\n",
	} {
		if got := string(AppendComment(nil, text)); got != want {
			t.Errorf("AppendComment(%q) = %q, want %q", text, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		0:                       "retry: 0\n",
		1500 * time.Millisecond: "retry: 1500\n",
		1999 * time.Microsecond: "retry: 1\n",
		time.Hour:               "retry: 3600000\n",
	} {
		got, err := AppendRetry(nil, d)
		if err != nil || string(got) != want {
			t.Errorf("AppendRetry(%v) = %q, %v; want %q", d, got, err, want)
		}
	}
	if _, err := AppendRetry(nil, -time.Millisecond); !errors.Is(err, ErrNegativeRetry) {
		t.Errorf("negative retry: err = %v, want %v", err, ErrNegativeRetry)
	}
}

// TestEncoderIDTracking: the first block always carries its id; later ones
// only when the client's last event ID string must change.
func TestEncoderIDTracking(t *testing.T) {
	var out bytes.Buffer
	e := NewEncoder(&out)
	steps := []struct {
		call func() error
		want string
	}{
		{func() error { return e.Event(Event{Data: "a"}) }, "id:\ndata: a\n\n"},
		{func() error { return e.Event(Event{Data: "b"}) }, "data: b\n\n"},
		{func() error { return e.Event(Event{Data: "c", ID: "1"}) }, "id: 1\ndata: c\n\n"},
		{func() error { return e.Event(Event{Data: "d", ID: "1"}) }, "data: d\n\n"},
		{func() error { return e.ID("1") }, ""},
		{func() error { return e.ID("2") }, "id: 2\n\n"},
		{func() error { return e.Event(Event{Data: "e", ID: "2"}) }, "data: e\n\n"},
		{func() error { return e.Event(Event{Data: "f"}) }, "id:\ndata: f\n\n"},
		{func() error { return e.Comment("hb") }, ": hb\n"},
		{func() error { return e.Retry(time.Second) }, "retry: 1000\n"},
	}
	for i, s := range steps {
		out.Reset()
		if err := s.call(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if out.String() != s.want {
			t.Errorf("step %d wrote %q, want %q", i, out.String(), s.want)
		}
	}
}

func TestEncoderFirstIDBlock(t *testing.T) {
	var out bytes.Buffer
	if err := NewEncoder(&out).ID(""); err != nil || out.String() != "id:\n\n" {
		t.Errorf("first ID(\"\") wrote %q, %v; want an id block", out.String(), err)
	}
}

// TestEncoderRejectsWithoutState: a failed call writes nothing and leaves
// the id the client holds unchanged.
func TestEncoderRejectsWithoutState(t *testing.T) {
	var out bytes.Buffer
	e := NewEncoder(&out)
	if err := e.Event(Event{Data: "a", ID: "1"}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	for _, err := range []error{
		e.Event(Event{Data: "b", ID: "2\n"}),
		e.Event(Event{Data: "b", Type: "x\ny"}),
		e.ID("3\x00"),
		e.Retry(-1),
	} {
		if err == nil {
			t.Error("want an error")
		}
	}
	if out.Len() != 0 {
		t.Errorf("rejected calls wrote %q", out.String())
	}
	if err := e.Event(Event{Data: "c", ID: "1"}); err != nil || out.String() != "data: c\n\n" {
		t.Errorf("after rejections wrote %q, %v; want no id line", out.String(), err)
	}
}

// countingWriter records each Write call.
type countingWriter struct{ writes []string }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestEncoderOneWritePerCall: an event goes out in one Write, so a flush
// after it never sends half an event.
func TestEncoderOneWritePerCall(t *testing.T) {
	w := &countingWriter{}
	e := NewEncoder(w)
	_ = e.Event(Event{Type: "t", Data: "a\nb\nc", ID: "1"})
	_ = e.Comment("x\ny")
	if len(w.writes) != 2 {
		t.Errorf("writes = %q, want 2", w.writes)
	}
}

type failingWriter struct{}

var errWrite = errors.New("broken pipe")

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestEncoderWriteError(t *testing.T) {
	var out bytes.Buffer
	e := NewEncoder(&out)
	if err := e.Event(Event{Data: "a", ID: "1"}); err != nil {
		t.Fatal(err)
	}
	e.w = failingWriter{}
	if err := e.Event(Event{Data: "b", ID: "2"}); !errors.Is(err, errWrite) {
		t.Errorf("err = %v, want %v", err, errWrite)
	}
	// "id: 2" did not reach the client, so it must be sent again.
	out.Reset()
	e.w = &out
	if err := e.Event(Event{Data: "b", ID: "2"}); err != nil || !strings.HasPrefix(out.String(), "id: 2\n") {
		t.Errorf("after a failed write: %q, %v; want the id again", out.String(), err)
	}
}

// TestEncoderReaderRoundTrip encodes a session and reads it back.
func TestEncoderReaderRoundTrip(t *testing.T) {
	var out bytes.Buffer
	e := NewEncoder(&out)
	events := []Event{
		{Type: "message", Data: "{\"a\":1}", ID: "1"},
		{Type: "update", Data: "line 1\nline 2\n\nline 4", ID: "2"},
		{Type: "message", Data: "", ID: "2"},
		{Type: "message", Data: " spaced ", ID: ""},
	}
	for _, ev := range events {
		if err := e.Event(ev); err != nil {
			t.Fatal(err)
		}
	}
	_ = e.Comment("keep-alive")
	_ = e.Retry(2 * time.Second)
	_ = e.ID("9")
	want := []Item{
		{Kind: KindEvent, Event: events[0]}, {Kind: KindEvent, Event: events[1]},
		{Kind: KindEvent, Event: events[2]}, {Kind: KindEvent, Event: events[3]},
		comment("keep-alive"), retry(2000), idItem("9"),
	}
	if got := mustReadAll(t, NewReader(&out, Options{})); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip\n got %s\nwant %s", short(got), short(want))
	}
}
