package sequence

import (
	"testing"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
)

// Under range, an event that folds several updates is in order when it
// covers L+1 (Binance spot depth, U ≤ L+1 ≤ u): no false gap; one wholly at
// or below L is stale; one starting past L+1 is a real gap, held until the
// events it waits for arrive.
func TestRangeModel(t *testing.T) {
	h := newHarness(t, Config{Model: buffer.ModelRange, Policy: PolicySkip}, false)
	h.burst(1, "/157..160", "/161..161", "/162..165", "/150..158", "/163..164")
	h.burst(1, "/170..172", "/166..169", "/173..180")
	h.expectGot("/157..160", "/161..161", "/162..165", "/166..169", "/170..172", "/173..180")
	h.expectGaps(map[string]int{labels.GapFilled: 1})
	if dups, _, _, _ := h.metrics.snapshot(); dups != 2 {
		t.Fatalf("%d duplicates counted, want 2 (two stale events)", dups)
	}
}

// A held range that a later delivered range covers is dropped as stale,
// and counted with the duplicates.
func TestRangeModelDropsCoveredHeld(t *testing.T) {
	h := newHarness(t, Config{Model: buffer.ModelRange, Policy: PolicySkip}, false)
	h.burst(1, "/1..10", "/20..25", "/11..30", "/31..31")
	h.expectGot("/1..10", "/11..30", "/31..31")
	if dups, _, _, _ := h.metrics.snapshot(); dups != 1 {
		t.Fatalf("%d duplicates counted, want 1 (held 20..25)", dups)
	}
	h.expectGaps(map[string]int{labels.GapFilled: 1})
}

// A real range gap is given up after the timeout with the numbers that are
// missing, not the ones the held event covers.
func TestRangeModelGapGivenUp(t *testing.T) {
	notice := mustNotice(t, `gap {{.From}}-{{.To}}`)
	h := newHarness(t, Config{Model: buffer.ModelRange, Policy: PolicyNotify, Notice: notice}, false)
	h.burst(1, "/1..10", "/15..20")
	h.clock.Advance(testTimeout)
	h.stop()
	h.expectGot("/1..10", "gap 11-14", "/15..20")
	h.expectGaps(map[string]int{labels.GapNotified: 1})
}

// Under chain, a message is in order when its predecessor is L (Deribit's
// prev_change_id): ids need not be consecutive. A broken link is a gap;
// a message without a predecessor (a snapshot) restarts the chain.
func TestChainModel(t *testing.T) {
	notice := mustNotice(t, `gap {{.From}}-{{.To}}`)
	h := newHarness(t, Config{Model: buffer.ModelChain, Policy: PolicyNotify, Notice: notice}, false)
	h.burst(1, "/100", "/100>104", "/104>111", "/104>111", "/111>120", "/130>135")
	h.clock.Advance(testTimeout)
	h.burst(1, "/135>140", "/500", "/500>503")
	h.expectGot("/100", "/100>104", "/104>111", "/111>120", "gap 121-130", "/130>135", "/135>140", "/500", "/500>503")
	h.expectGaps(map[string]int{labels.GapNotified: 1})
	if dups, _, _, _ := h.metrics.snapshot(); dups != 1 {
		t.Fatalf("%d duplicates counted, want 1", dups)
	}
}

// Under increasing, any larger number is in order: nothing is held, and a
// number at or below L is dropped as a duplicate, reordered or repeated.
func TestIncreasingModel(t *testing.T) {
	h := newHarness(t, Config{Model: buffer.ModelIncreasing, Policy: PolicyClose}, false)
	h.burst(1, "/5", "/9", "/7", "/9", "/30", "/31")
	h.expectGot("/5", "/9", "/30", "/31")
	h.expectGaps(map[string]int{})
	if dups, _, _, _ := h.metrics.snapshot(); dups != 2 {
		t.Fatalf("%d duplicates counted, want 2", dups)
	}
}
