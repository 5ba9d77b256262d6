package upstream

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/tetherproxy/tether/internal/sse"
)

// TestAppendJSONString: every string the sse package can produce (valid
// UTF-8) comes out as a JSON string that decodes back to itself, with the
// short escapes JSON has and nothing escaped that need not be.
func TestAppendJSONString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`q"b\s`, `"q\"b\\s"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f" + `"`},
		{"<&> é€😀 \u2028", "\"<&> é€😀 \u2028\""},
		{"a\nb", `"a\nb"`},
	}
	for _, tt := range tests {
		got := string(appendJSONString([]byte("x"), tt.in))
		if got != "x"+tt.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", tt.in, got[1:], tt.want)
		}
		checkRoundTrip(t, tt.in)
	}
}

func checkRoundTrip(t *testing.T, s string) {
	t.Helper()
	enc := appendJSONString(nil, s)
	var back string
	if err := json.Unmarshal(enc, &back); err != nil {
		t.Fatalf("appendJSONString(%q) = %s: not JSON: %v", s, enc, err)
	}
	if back != s {
		t.Fatalf("appendJSONString(%q) = %s decodes to %q", s, enc, back)
	}
}

// FuzzAppendJSONString: any valid UTF-8 round-trips through encoding/json.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00\n\u2028", "😀\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip("the sse package only produces valid UTF-8")
		}
		checkRoundTrip(t, s)
	})
}

// TestSSEMessageShape: the JSON message holds its three members in a fixed
// order, and the data format is the data alone.
func TestSSEMessageShape(t *testing.T) {
	ev := sse.Event{Type: "price", Data: "a\nb", ID: "7"}
	if got := string(SSEJSON.appendMessage(nil, ev)); got != `{"id":"7","event":"price","data":"a\nb"}` {
		t.Errorf("json message %s", got)
	}
	if got := string(SSEData.appendMessage(nil, ev)); got != "a\nb" {
		t.Errorf("data message %q", got)
	}
}

// benchEvent is a typical event: a numeric id, a named type and one line of
// JSON data whose quotes all need escaping.
var benchEvent = sse.Event{
	ID:   "1048576",
	Type: "price",
	Data: `{"t":"event","seq":1048576,"channel":"quotes.eu","symbol":"ACME","bid":101.25,"ask":101.27,"size":300,"venue":"XPAR","ts":"2026-01-02T15:04:05.123456Z","flags":["open","live"]}`,
}

// TestSSEFormatAllocs: formatting into a reused buffer allocates nothing.
func TestSSEFormatAllocs(t *testing.T) {
	buf := make([]byte, 0, 1024)
	for _, f := range []SSEFormat{SSEJSON, SSEData} {
		if n := testing.AllocsPerRun(100, func() { buf = f.appendMessage(buf[:0], benchEvent) }); n != 0 {
			t.Errorf("%v: %v allocations per event, want 0", f, n)
		}
	}
}

func BenchmarkSSEFormat(b *testing.B) {
	b.Run("json", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf = SSEJSON.appendMessage(buf[:0], benchEvent)
		}
	})
	// The same message built with encoding/json, for comparison.
	b.Run("encoding-json", func(b *testing.B) {
		type message struct {
			ID    string `json:"id"`
			Event string `json:"event"`
			Data  string `json:"data"`
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(message{benchEvent.ID, benchEvent.Type, benchEvent.Data}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("data", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf = SSEData.appendMessage(buf[:0], benchEvent)
		}
	})
}
