package sse

import (
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func retry(ms int64) Item {
	return Item{Kind: KindRetry, Retry: time.Duration(ms) * time.Millisecond}
}

type readerCase struct {
	name   string
	in     string
	seedID string
	want   []Item
	lastID string // LastEventID after the stream
}

// checkCase runs one case three ways: whole, one byte per Read, and
// against the reference implementation, which must agree.
func checkCase(t *testing.T, tc readerCase) {
	t.Helper()
	feeds := map[string]io.Reader{
		"whole":   strings.NewReader(tc.in),
		"onebyte": iotest.OneByteReader(strings.NewReader(tc.in)),
		"dataerr": iotest.DataErrReader(strings.NewReader(tc.in)),
	}
	for name, src := range feeds {
		r := NewReader(src, Options{LastEventID: tc.seedID})
		got := mustReadAll(t, r)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: items\n got %s\nwant %s", name, short(got), short(tc.want))
		}
		if r.LastEventID() != tc.lastID {
			t.Errorf("%s: LastEventID = %q, want %q", name, r.LastEventID(), tc.lastID)
		}
	}
	ref := refParse([]byte(tc.in), tc.seedID)
	if !reflect.DeepEqual(ref.items, tc.want) || ref.lastEventID != tc.lastID {
		t.Errorf("reference disagrees with the table: %#v, last id %q", ref.items, ref.lastEventID)
	}
}

// TestReaderSpecExamples runs the examples of the HTML standard's 9.2.5
// and 9.2.6, with the outcome the standard's prose gives for each.
func TestReaderSpecExamples(t *testing.T) {
	cases := []readerCase{{
		// "data: YHOO / +2 / 10": one event, lines joined by LF.
		name: "stock ticker, multi-line data",
		in:   "data: YHOO\ndata: +2\ndata: 10\n\n",
		want: []Item{msg("YHOO\n+2\n10", "")},
	}, {
		// The comment block fires nothing; the second block fires "first
		// event" and sets the id to 1; the third fires "second event" and
		// its empty id resets the last event ID; the last fires " third
		// event" with its leading space.
		name:   "comment, id, id reset, leading space",
		in:     ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
		want:   []Item{comment("test stream"), msg("first event", "1"), msg("second event", ""), msg(" third event", "")},
		lastID: "",
	}, {
		// "the last still has to end with a blank line": the same stream
		// cut after the last data line dispatches nothing for it.
		name:   "end of stream is not a blank line",
		in:     ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n",
		want:   []Item{comment("test stream"), msg("first event", "1"), msg("second event", "")},
		lastID: "",
	}, {
		// The first block fires an event with empty data, the second with
		// a single LF; the last ("data:") is not followed by a blank line.
		name: "empty data, newline data, discarded tail",
		in:   "data\n\ndata\ndata\n\ndata:",
		want: []Item{msg("", ""), msg("\n", "")},
	}, {
		// "data:test" and "data: test" are the same: one space is optional.
		name: "space after colon",
		in:   "data:test\n\ndata: test\n\n",
		want: []Item{msg("test", ""), msg("test", "")},
	}, {
		name: "named events",
		in:   "event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
		want: []Item{ev("add", "73857293", ""), ev("remove", "2153", ""), ev("add", "113411", "")},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkCase(t, tc) })
	}
}

// TestReaderLines covers decoding and the line rules: BOM, line ends,
// the field/value split.
func TestReaderLines(t *testing.T) {
	cases := []readerCase{
		{name: "BOM stripped at start", in: "\uFEFFdata: a\n\n", want: []Item{msg("a", "")}},
		{name: "only one BOM stripped", in: "\uFEFF\uFEFFdata: a\n\ndata: b\n\n", want: []Item{msg("b", "")}},
		{name: "BOM later is text", in: "data: a\n\n\uFEFFdata: b\n\n", want: []Item{msg("a", "")}},
		{name: "BOM in a value is kept", in: "data: \uFEFFa\n\n", want: []Item{msg("\uFEFFa", "")}},
		{name: "BOM prefix alone is not a BOM", in: "\xEF\xBBdata: a\n\ndata: b\n\n", want: []Item{msg("b", "")}},
		{name: "LF", in: "data: a\ndata: b\n\n", want: []Item{msg("a\nb", "")}},
		{name: "CRLF", in: "data: a\r\ndata: b\r\n\r\n", want: []Item{msg("a\nb", "")}},
		{name: "CR", in: "data: a\rdata: b\r\r", want: []Item{msg("a\nb", "")}},
		{name: "mixed line ends", in: "data: a\rdata: b\r\ndata: c\n\r\n", want: []Item{msg("a\nb\nc", "")}},
		{name: "LF CR is two line ends", in: "data: a\n\rdata: b\n\n", want: []Item{msg("a", ""), msg("b", "")}},
		{name: "CR CR is two line ends", in: "data: a\r\rdata: b\r\r", want: []Item{msg("a", ""), msg("b", "")}},
		{name: "CR LF LF is a line end and a blank line", in: "data: a\r\n\ndata: b\n\n", want: []Item{msg("a", ""), msg("b", "")}},
		{name: "split at the first colon", in: "data: a: b:c\n\n", want: []Item{msg("a: b:c", "")}},
		{name: "only one space removed", in: "data:   a\n\n", want: []Item{msg("  a", "")}},
		{name: "tab is not a space", in: "data:\ta\n\n", want: []Item{msg("\ta", "")}},
		{name: "line without colon is a field with an empty value", in: "data\n\n", want: []Item{msg("", "")}},
		{name: "field names are case-sensitive", in: "Data: a\nDATA: b\n\n", want: nil},
		{name: "space before colon is part of the name", in: "data : a\n\n", want: nil},
		{name: "unknown fields ignored", in: "foo: bar\ndata: a\nx\n\n", want: []Item{msg("a", "")}},
		{name: "NUL in data kept", in: "data: a\x00b\n\n", want: []Item{msg("a\x00b", "")}},
		{name: "unterminated last line discarded", in: "data: a\n\ndata: b\n", want: []Item{msg("a", "")}},
		{name: "unterminated retry discarded", in: "retry: 10", want: nil},
		{name: "empty stream", in: "", want: nil},
		{name: "blank lines only", in: "\n\r\n\r\n", want: nil},
		{name: "invalid lead bytes", in: "data: \xC0\xAF\xFF\n\n", want: []Item{msg("\uFFFD\uFFFD\uFFFD", "")}},
		// A truncated sequence is one U+FFFD (its maximal subpart), where
		// Go's utf8.DecodeRune would give one per byte.
		{name: "truncated sequence is one replacement", in: "data: \xE2\x82A\xF0\x9F\x98\n\n", want: []Item{msg("\uFFFDA\uFFFD", "")}},
		{name: "surrogate encoding", in: "data: \xED\xA0\x80\n\n", want: []Item{msg("\uFFFD\uFFFD\uFFFD", "")}},
		{name: "overlong encoding", in: "data: \xE0\x80\xAF\n\n", want: []Item{msg("\uFFFD\uFFFD\uFFFD", "")}},
		{name: "above U+10FFFF", in: "data: \xF4\x90\x80\x80\n\n", want: []Item{msg("\uFFFD\uFFFD\uFFFD\uFFFD", "")}},
		{name: "truncated before a line end", in: "data: \xE2\x82\ndata: b\n\n", want: []Item{msg("\uFFFD\nb", "")}},
		{name: "invalid bytes in a field name", in: "dat\xE1: a\n\n", want: nil},
		{name: "valid multi-byte text", in: "data: héllo 世界 🎉\n\n", want: []Item{msg("héllo 世界 🎉", "")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkCase(t, tc) })
	}
}

// TestReaderFields covers what each field does, and dispatch.
func TestReaderFields(t *testing.T) {
	cases := []readerCase{
		{name: "trailing LF of data removed", in: "data: a\ndata:\n\n", want: []Item{msg("a\n", "")}},
		{name: "type defaults to message", in: "data: a\n\n", want: []Item{msg("a", "")}},
		{name: "empty event field is message", in: "event:\ndata: a\n\n", want: []Item{msg("a", "")}},
		{name: "type is per block", in: "event: x\ndata: a\n\ndata: b\n\n", want: []Item{ev("x", "a", ""), msg("b", "")}},
		{name: "last event field wins", in: "event: x\nevent: y\ndata: a\n\n", want: []Item{ev("y", "a", "")}},
		{name: "type of a block without data is dropped", in: "event: x\n\ndata: a\n\n", want: []Item{msg("a", "")}},
		{name: "id persists across events", in: "id: 1\ndata: a\n\ndata: b\n\n", want: []Item{msg("a", "1"), msg("b", "1")}, lastID: "1"},
		{name: "id after data in a block applies", in: "data: a\nid: 7\n\n", want: []Item{msg("a", "7")}, lastID: "7"},
		{name: "empty id resets", in: "id: 1\ndata: a\n\nid\ndata: b\n\n", want: []Item{msg("a", "1"), msg("b", "")}},
		{name: "id with NUL ignored", in: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", want: []Item{msg("a", "1"), msg("b", "1")}, lastID: "1"},
		{name: "id keeps spaces after the first", in: "id:  x \ndata: a\n\n", want: []Item{msg("a", " x ")}, lastID: " x "},
		{name: "id with invalid UTF-8 decoded", in: "id: \xFF\ndata: a\n\n", want: []Item{msg("a", "\uFFFD")}, lastID: "\uFFFD"},
		{
			// Step 1 of dispatch sets the last event ID string before
			// step 2 returns on empty data.
			name: "id-only block sets the last event ID", in: "id: 5\n\ndata: a\n\n",
			want: []Item{idItem("5"), msg("a", "5")}, lastID: "5",
		},
		{name: "id-only block repeating the id reports nothing", in: "id: 5\n\nid: 5\n\n", want: []Item{idItem("5")}, lastID: "5"},
		{name: "id-only block resetting to empty", in: "id: 5\n\nid\n\n", want: []Item{idItem("5"), idItem("")}},
		{name: "id of an undispatched block is not the last event ID", in: "id: 1\ndata: a\n\nid: 2\ndata: b\n", want: []Item{msg("a", "1")}, lastID: "1"},
		{name: "seeded id persists", in: "data: a\n\n", seedID: "41", want: []Item{msg("a", "41")}, lastID: "41"},
		{name: "seeded id replaced", in: "id: 42\ndata: a\n\n", seedID: "41", want: []Item{msg("a", "42")}, lastID: "42"},
		{name: "seeded id reset", in: "id\n\n", seedID: "41", want: []Item{idItem("")}},
		{name: "retry", in: "retry: 1500\n", want: []Item{retry(1500)}},
		{name: "retry is reported before dispatch", in: "data: a\nretry: 10\n\n", want: []Item{retry(10), msg("a", "")}},
		{name: "retry zero", in: "retry: 0\n", want: []Item{retry(0)}},
		{name: "retry leading zeros", in: "retry: 007\n", want: []Item{retry(7)}},
		{name: "retry without colon ignored", in: "retry\n", want: nil},
		{name: "retry empty ignored", in: "retry:\nretry: \n", want: nil},
		{name: "retry with unit ignored", in: "retry: 10ms\n", want: nil},
		{name: "retry negative ignored", in: "retry: -1\n", want: nil},
		{name: "retry decimal ignored", in: "retry: 1.5\n", want: nil},
		{name: "retry with two spaces ignored", in: "retry:  10\n", want: nil},
		{name: "retry with trailing space ignored", in: "retry: 10 \n", want: nil},
		{name: "retry full-width digits ignored", in: "retry: １０\n", want: nil},
		{name: "retry huge saturates", in: "retry: 99999999999999999999999\n", want: []Item{{Kind: KindRetry, Retry: math.MaxInt64}}},
		{name: "retry largest exact", in: "retry: 9223372036854\n", want: []Item{retry(9223372036854)}},
		{name: "retry one past largest saturates", in: "retry: 9223372036855\n", want: []Item{{Kind: KindRetry, Retry: math.MaxInt64}}},
		{name: "comment", in: ": ping\n", want: []Item{comment("ping")}},
		{name: "bare colon comment", in: ":\n", want: []Item{comment("")}},
		{name: "comment keeps further spaces", in: ":  x\n", want: []Item{comment(" x")}},
		{name: "comment inside a block changes nothing", in: "data: a\n: hb\ndata: b\n\n", want: []Item{comment("hb"), msg("a\nb", "")}},
		{name: "comment with invalid UTF-8", in: ":\xFF\n", want: []Item{comment("\uFFFD")}},
		{name: "comment is not a blank line", in: "data: a\n:\n", want: []Item{comment("")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkCase(t, tc) })
	}
}

// TestReaderSplitReads places Read boundaries where a streaming parser can
// go wrong.
func TestReaderSplitReads(t *testing.T) {
	cases := []struct {
		name   string
		chunks []string
		want   []Item
	}{
		// The LF completes the CR's line end; read alone it would be a
		// blank line and dispatch "a" before "b" arrived.
		{"CR | LF", []string{"data: a\r", "\ndata: b\r\n\r\n"}, []Item{msg("a\nb", "")}},
		{"CR | LF twice", []string{"data: a\r", "\n\r", "\n"}, []Item{msg("a", "")}},
		{"CR | CR", []string{"data: a\r", "\rdata: b\n\n"}, []Item{msg("a", ""), msg("b", "")}},
		{"CR | empty reads | LF", []string{"data: a\r", "", "", "\ndata: b\n\n"}, []Item{msg("a\nb", "")}},
		{"BOM split", []string{"\xEF", "\xBB", "\xBFdata: a\n\n"}, []Item{msg("a", "")}},
		{"BOM prefix then text", []string{"\xEF\xBB", "data: a\n\ndata: b\n\n"}, []Item{msg("b", "")}},
		{"UTF-8 sequence split", []string{"data: \xE4", "\xB8", "\x96\n\n"}, []Item{msg("世", "")}},
		{"truncated sequence split", []string{"data: \xE2", "\x82", "A\n\n"}, []Item{msg("\uFFFDA", "")}},
		{"field name split", []string{"da", "ta", ": a\n", "\n"}, []Item{msg("a", "")}},
		{"line longer than the read buffer", []string{"data: " + strings.Repeat("x", 3*readSize), "\n\n"}, []Item{msg(strings.Repeat("x", 3*readSize), "")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(&chunkReader{chunks: tc.chunks}, Options{})
			if got := mustReadAll(t, r); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("items\n got %s\nwant %s", short(got), short(tc.want))
			}
		})
	}
}

// TestReaderIncremental checks that Next returns an item as soon as the
// bytes completing it have been read, without waiting for more: a source
// that blocks after the blank line must not hold the event back. Each step
// is written by one goroutine that the step waits for; io.Pipe hands the
// bytes over write by write, so the CR and the LF arrive in separate Reads.
func TestReaderIncremental(t *testing.T) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pr.Close() })
	r := NewReader(pr, Options{})
	steps := []struct {
		writes []string
		want   Item
	}{
		{[]string{"data: a\r", "\n\r\n"}, msg("a", "")},
		{[]string{": hb\n"}, comment("hb")},
		{[]string{"retry: 5\n"}, retry(5)},
		{[]string{"id: 9\n", "\n"}, idItem("9")},
	}
	for _, s := range steps {
		done := make(chan error, 1)
		go func() {
			for _, w := range s.writes {
				if _, err := pw.Write([]byte(w)); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		got, err := r.Next()
		if werr := <-done; werr != nil {
			t.Fatalf("write: %v", werr)
		}
		if err != nil || !reflect.DeepEqual(got, s.want) {
			t.Fatalf("after %q: got %#v, %v; want %#v", s.writes, got, err, s.want)
		}
	}
	if r.LastEventID() != "9" {
		t.Errorf("LastEventID = %q, want 9", r.LastEventID())
	}
	if d, ok := r.Retry(); d != 5*time.Millisecond || !ok {
		t.Errorf("Retry = %v, %v; want 5ms, true", d, ok)
	}
	_ = pw.Close()
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after close: %v, want io.EOF", err)
	}
}

func TestReaderRetryUnset(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\n"), Options{})
	mustReadAll(t, r)
	if d, ok := r.Retry(); d != 0 || ok {
		t.Errorf("Retry = %v, %v; want 0, false", d, ok)
	}
}

func TestReaderMaxEventSize(t *testing.T) {
	const limit = 64
	cases := []struct {
		name     string
		in       string
		wantLine bool
		wantErr  bool
		want     []Item
	}{
		{name: "line at the limit", in: "data: " + strings.Repeat("x", limit-6) + "\n\n", want: []Item{msg(strings.Repeat("x", limit-6), "")}},
		{name: "line over the limit", in: "data: " + strings.Repeat("x", limit-5) + "\n\n", wantErr: true, wantLine: true},
		{name: "unterminated line over the limit", in: "data: a\n\n:" + strings.Repeat("x", limit), wantErr: true, wantLine: true, want: []Item{msg("a", "")}},
		{name: "comment over the limit", in: ":" + strings.Repeat("x", limit) + "\n", wantErr: true, wantLine: true},
		{name: "data at the limit", in: strings.Repeat("data: 0123456\n", limit/8) + "\n", want: []Item{msg(strings.Repeat("0123456\n", limit/8-1)+"0123456", "")}},
		{name: "data over the limit", in: strings.Repeat("data: 0123456\n", limit/8+1) + "\n", wantErr: true},
		// Invalid bytes decode to three bytes each: the limit is on what
		// the Reader holds, not on what arrived.
		{name: "decoded data over the limit", in: "data: " + strings.Repeat("\xFF", limit/3+1) + "\n\n", wantErr: true},
		{name: "comments do not accumulate", in: strings.Repeat(": "+strings.Repeat("x", limit-3)+"\n", 100), want: repeatItem(comment(strings.Repeat("x", limit-3)), 100)},
		{name: "data is per event", in: strings.Repeat("data: "+strings.Repeat("x", limit-8)+"\n\n", 100), want: repeatItem(msg(strings.Repeat("x", limit-8), ""), 100)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for name, src := range map[string]io.Reader{
				"whole":   strings.NewReader(tc.in),
				"onebyte": iotest.OneByteReader(strings.NewReader(tc.in)),
			} {
				r := NewReader(src, Options{MaxEventSize: limit})
				got, err := readAll(r)
				var tl *TooLargeError
				if tc.wantErr != errors.As(err, &tl) {
					t.Fatalf("%s: err = %v, want a TooLargeError: %v", name, err, tc.wantErr)
				}
				if tc.wantErr && (tl.Limit != limit || tl.Line != tc.wantLine) {
					t.Errorf("%s: err = %+v, want limit %d line %v", name, tl, limit, tc.wantLine)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: items\n got %s\nwant %s", name, short(got), short(tc.want))
				}
			}
		})
	}
}

func repeatItem(it Item, n int) []Item {
	items := make([]Item, n)
	for i := range items {
		items[i] = it
	}
	return items
}

func TestTooLargeErrorNamesTheLimit(t *testing.T) {
	_, err := readAll(NewReader(strings.NewReader(strings.Repeat("x", 100)), Options{MaxEventSize: 10}))
	if err == nil || !strings.Contains(err.Error(), "10 bytes") || !strings.Contains(err.Error(), "MaxEventSize") {
		t.Errorf("err = %v, want it to name the limit", err)
	}
}

func TestReaderDefaultMaxEventSize(t *testing.T) {
	in := "data: " + strings.Repeat("x", DefaultMaxEventSize) + "\n\n"
	_, err := readAll(NewReader(strings.NewReader(in), Options{}))
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != DefaultMaxEventSize {
		t.Errorf("err = %v, want a TooLargeError at %d", err, DefaultMaxEventSize)
	}
}

var errBroken = errors.New("connection reset")

// TestReaderErrors: items completed before a read error are returned
// first; the error is wrapped and sticky; io.EOF is returned unwrapped.
func TestReaderErrors(t *testing.T) {
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(errBroken))
	r := NewReader(src, Options{})
	got, err := readAll(r)
	if !errors.Is(err, errBroken) {
		t.Fatalf("err = %v, want %v", err, errBroken)
	}
	if want := []Item{msg("a", "")}; !reflect.DeepEqual(got, want) {
		t.Errorf("items = %#v, want %#v", got, want)
	}
	if _, again := r.Next(); again != err {
		t.Errorf("second Next = %v, want the same error", again)
	}

	r = NewReader(strings.NewReader("data: a\n\n"), Options{})
	mustReadAll(t, r)
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the end: %v, want io.EOF itself", err)
	}
}

// emptyReader returns no bytes and no error, forever.
type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderNoProgress(t *testing.T) {
	_, err := NewReader(emptyReader{}, Options{}).Next()
	if !errors.Is(err, errNoProgress) {
		t.Errorf("err = %v, want %v", err, errNoProgress)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindEvent: "event", KindComment: "comment", KindRetry: "retry", KindID: "id", 0: "Kind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// TestReaderReleasesHugeBuffers: one event near MaxEventSize must not pin
// that much memory for the rest of the stream.
func TestReaderReleasesHugeBuffers(t *testing.T) {
	big := strings.Repeat("x", 4*keepCap)
	in := "data: " + big + "\n\n:" + big + "\ndata: small\n\n"
	r := NewReader(iotest.HalfReader(strings.NewReader(in)), Options{})
	got := mustReadAll(t, r)
	if want := []Item{msg(big, ""), comment(big), msg("small", "")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("items = %s", short(got))
	}
	if cap(r.data) > keepCap || cap(r.line) > keepCap {
		t.Errorf("kept %d bytes of data and %d of line buffer, want at most %d", cap(r.data), cap(r.line), keepCap)
	}
}
