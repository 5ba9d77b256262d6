package sequence

import (
	"slices"
	"testing"

	"github.com/tetherproxy/tether/buffer"
)

func TestEventID(t *testing.T) {
	tests := []struct {
		stream string
		seq    int64
		want   string
	}{
		{"prices", 7, "prices:7"},
		{"", 42, "42"},
		{"a:b", 3, "a:b:3"},
		{"x", -1, "x:-1"},
		{"line\nbreak", 1, ""},
		{"nul\x00", 1, ""},
	}
	for _, tt := range tests {
		got := EventID(tt.stream, tt.seq)
		if got != tt.want {
			t.Errorf("EventID(%q, %d) = %q, want %q", tt.stream, tt.seq, got, tt.want)
		}
		if got == "" {
			continue
		}
		if stream, seq, ok := ParseEventID(got); !ok || stream != tt.stream || seq != tt.seq {
			t.Errorf("ParseEventID(%q) = %q, %d, %v; want %q, %d", got, stream, seq, ok, tt.stream, tt.seq)
		}
	}
	for _, bad := range []string{"", ":", ":5", "prices:", "prices:+5", "prices:x", "7DQ3KPXQ5ZJ2N4LHWT6YFVMB2A-41", "a\nb:5", "1e3", "prices:99999999999999999999"} {
		if stream, seq, ok := ParseEventID(bad); ok {
			t.Errorf("ParseEventID(%q) = %q, %d: accepted", bad, stream, seq)
		}
	}
}

// With EventIDs, each numbered message is delivered named by its stream
// and number, a held one too once its gap is filled, and a snapshot by the
// number it resets to; a message without a number has no name, and the
// upstream's own name (Fields.EventID) comes first.
func TestSequencerNamesEvents(t *testing.T) {
	h := newHarness(t, Config{EventIDs: true}, false)
	h.burst(1, msg("a", 1), msg("a", 3), "plain", msg("a", 2), snapshot("b", 10))
	f := fieldsOf(msg("a", 4))
	f.EventID = "upstream-4"
	h.s.Offer(1, buffer.Message{Data: []byte(msg("a", 4))}, false, f)
	h.s.Flush()
	h.stop()
	h.expectGot(msg("a", 1), "plain", msg("a", 2), msg("a", 3), snapshot("b", 10), msg("a", 4))
	if want := []string{"a:1", "", "a:2", "a:3", "b:10", "upstream-4"}; !slices.Equal(h.app.ids, want) {
		t.Errorf("event ids %q, want %q", h.app.ids, want)
	}
}

// Without EventIDs nothing is named but what the upstream named.
func TestSequencerNamesNothingUnasked(t *testing.T) {
	h := newHarness(t, Config{}, false)
	h.burst(1, msg("a", 1), msg("a", 2))
	h.stop()
	if want := []string{"", ""}; !slices.Equal(h.app.ids, want) {
		t.Errorf("event ids %q, want %q", h.app.ids, want)
	}
}
