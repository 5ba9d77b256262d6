package sequence

import (
	"slices"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/labels"
)

// A new epoch starts the stream over at its number: under skip the stream
// goes on at once, the reset counted and logged once; the old epoch's
// numbers above the new ones are not taken for duplicates of it.
func TestEpochChangeResetsStreamSkip(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, false)
	h.burst(1, msg("a", 10)+"@e1", msg("a", 11)+"@e1", msg("b", 3)+"@x")
	h.burst(1, msg("a", 1)+"@e2", msg("a", 2)+"@e2", msg("a", 2)+"@e2", msg("b", 4)+"@x")
	h.expectGot(msg("a", 10)+"@e1", msg("a", 11)+"@e1", msg("b", 3)+"@x",
		msg("a", 1)+"@e2", msg("a", 2)+"@e2", msg("b", 4)+"@x")
	h.expectGaps(map[string]int{labels.GapEpoch: 1})
	if n := h.logged("stream reset"); n != 1 {
		t.Fatalf("%d stream reset lines, want 1", n)
	}
	if dups, _, _, _ := h.metrics.snapshot(); dups != 1 {
		t.Fatalf("%d duplicates counted, want 1 (a/2 repeated in epoch e2)", dups)
	}
}

// Under notify the app gets the notice, rendered with .Reset, ahead of the
// new epoch's first message; what was held behind a gap of the old epoch is
// given up first, with a notice of its own.
func TestEpochChangeNotifies(t *testing.T) {
	notice := mustNotice(t, `{{if .Reset}}reset {{.Reset}} {{.Stream}} {{.From}}{{else}}gap {{.Stream}} {{.From}}-{{.To}}{{end}}`)
	h := newHarness(t, Config{Policy: PolicyNotify, Notice: notice}, false)
	h.burst(1, msg("a", 5)+"@e1", msg("a", 8)+"@e1")
	h.burst(1, msg("a", 1)+"@e2", msg("a", 2)+"@e2")
	h.expectGot(msg("a", 5)+"@e1", "gap a 6-7", msg("a", 8)+"@e1", "reset epoch a 9",
		msg("a", 1)+"@e2", msg("a", 2)+"@e2")
	h.expectGaps(map[string]int{labels.GapEpoch: 1, labels.GapNotified: 1})
}

// Under close the app is closed with 1011 and the reset as reason, and
// nothing of the new epoch is delivered.
func TestEpochChangeCloses(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicyClose}, false)
	h.burst(1, msg("a", 5)+"@e1")
	h.burst(1, msg("a", 6)+"@e2", msg("a", 7)+"@e2")
	h.expectGot(msg("a", 5) + "@e1")
	if h.app.closeCode != CloseUnrecoverable || h.app.closeReason != "stream a reset: "+whyEpoch {
		t.Fatalf("app closed with %d %q", h.app.closeCode, h.app.closeReason)
	}
	h.expectGaps(map[string]int{labels.GapEpoch: 1})
}

// A message without an epoch, or a stream's first epoch, changes nothing.
func TestEpochFirstSeenIsNoReset(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, false)
	h.burst(1, msg("a", 5), msg("a", 6)+"@e1", msg("a", 7), msg("a", 8)+"@e1")
	h.expectGot(msg("a", 5), msg("a", 6)+"@e1", msg("a", 7), msg("a", 8)+"@e1")
	h.expectGaps(map[string]int{})
}

// Numbers that go back on a new connection are the server starting over,
// not duplicates: the stream is reset, logged, counted once and given to
// the policy, and the new numbers flow. On the same connection they are
// duplicates.
func TestNumbersBackOnNewConnectionReset(t *testing.T) {
	notice := mustNotice(t, `{{.Reset}} {{.Stream}} after {{.From}}`)
	h := newHarness(t, Config{Policy: PolicyNotify, Notice: notice}, false)
	h.burst(1, msg("a", 1), msg("a", 2), msg("a", 3), msg("a", 2))
	h.burst(2, msg("a", 1), msg("a", 2), msg("a", 2), msg("a", 3))
	h.expectGot(msg("a", 1), msg("a", 2), msg("a", 3), "restart a after 4", msg("a", 1), msg("a", 2), msg("a", 3))
	h.expectGaps(map[string]int{labels.GapRestart: 1})
	if n := h.logs.FilterMessage("stream reset").FilterField(fieldReason(whyRestart)).Len(); n != 1 {
		t.Fatalf("%d stream reset lines for the restart, want 1", n)
	}
	if dups, _, _, _ := h.metrics.snapshot(); dups != 2 {
		t.Fatalf("%d duplicates counted, want 2 (one per connection)", dups)
	}
}

// Under close, a restart closes the app with the reason.
func TestNumbersBackOnNewConnectionClose(t *testing.T) {
	h := newHarness(t, Config{}, false)
	h.burst(1, msg("", 7), msg("", 8))
	h.burst(2, msg("", 1))
	h.expectGot(msg("", 7), msg("", 8))
	if h.app.closeCode != CloseUnrecoverable || h.app.closeReason != "stream reset: "+whyRestart {
		t.Fatalf("app closed with %d %q", h.app.closeCode, h.app.closeReason)
	}
}

// A gap across a reconnect that nothing can fill (no resume, catch-up or
// resync) gets the policy at once instead of stalling the stream for the
// gap timeout; a gap on a live connection still waits, since a reordering
// may fill it.
func TestUnfillableGapAcrossReconnectAtOnce(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, false)
	h.burst(1, msg("a", 1), msg("a", 2), msg("a", 4))
	h.burst(2, msg("a", 9), msg("a", 10))
	h.expectGot(msg("a", 1), msg("a", 2), msg("a", 4), msg("a", 9), msg("a", 10))
	if n := h.logs.FilterMessage("gap given up, skipped").FilterField(fieldReason(whyUnfillable)).Len(); n != 1 {
		t.Fatalf("%d gaps given up at once, want 1", n)
	}
	h.burst(2, msg("a", 12))
	h.expectGot(msg("a", 1), msg("a", 2), msg("a", 4), msg("a", 9), msg("a", 10))
	h.clock.Advance(testTimeout)
	h.stop()
	h.expectGot(msg("a", 1), msg("a", 2), msg("a", 4), msg("a", 9), msg("a", 10), msg("a", 12))
	h.expectGaps(map[string]int{labels.GapSkipped: 2})
}

// With something that may fill it (here a catch-up), a gap across a
// reconnect waits for it as before.
func TestFillableGapAcrossReconnectWaits(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, true)
	h.burst(1, msg("a", 1))
	h.burst(2, msg("a", 4))
	c := h.nextFetch()
	h.reply(c, msg("a", 2), msg("a", 3))
	h.stop()
	h.expectGot(msg("a", 1), msg("a", 2), msg("a", 3), msg("a", 4))
	h.expectGaps(map[string]int{labels.GapFilled: 1})
}

// Under TETHER_SEQ_SCOPE=connection each connection numbers afresh:
// duplicates are dropped within one, the next starts the stream over
// without a reset or a gap, and a gap left open on the old connection is
// given up under the policy first.
func TestConnectionScope(t *testing.T) {
	h := newHarness(t, Config{Scope: ScopeConnection, Policy: PolicySkip}, false)
	h.burst(1, msg("a", 10), msg("a", 11), msg("a", 11), msg("b", 1), msg("b", 3))
	h.burst(2, msg("a", 1), msg("a", 2), msg("b", 1))
	h.burst(3, msg("a", 1), msg("a", 1), msg("b", 5))
	h.expectGot(msg("a", 10), msg("a", 11), msg("b", 1), msg("a", 1), msg("a", 2), msg("b", 3), msg("b", 1),
		msg("a", 1), msg("b", 5))
	h.expectGaps(map[string]int{labels.GapSkipped: 1})
	if dups, _, _, _ := h.metrics.snapshot(); dups != 2 {
		t.Fatalf("%d duplicates counted, want 2", dups)
	}
	if n := h.logged("stream reset"); n != 0 {
		t.Fatalf("%d stream reset lines, want none", n)
	}
}

// A stream that only repeats itself still surfaces its duplicates in the
// "duplicates dropped" line, once they have waited a second for it, with
// nothing delivered in between.
func TestDuplicatesOnlyAreReported(t *testing.T) {
	h := newHarness(t, Config{}, false)
	h.burst(1, msg("", 1), msg("", 2), msg("", 3))
	h.clock.Advance(2 * time.Second)
	h.burst(1, msg("", 1), msg("", 2), msg("", 3))
	h.clock.Advance(2 * time.Second)
	h.burst(1, msg("", 3))
	var counts []int64
	for _, e := range h.logs.FilterMessage("duplicates dropped").All() {
		counts = append(counts, e.ContextMap()["count"].(int64))
	}
	if !slices.Equal(counts, []int64{4}) {
		t.Fatalf("duplicates dropped lines: counts %v, want [4]", counts)
	}
}

// An epoch on a message without a number (Centrifugo's subscribe reply)
// starts the stream over at its next number, once.
func TestEpochOnUnnumberedMessage(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, false)
	h.burst(1, "/@e1", msg("", 4), msg("", 5))
	h.burst(1, "/@e2", msg("", 7), msg("", 8))
	h.expectGot("/@e1", msg("", 4), msg("", 5), "/@e2", msg("", 7), msg("", 8))
	h.expectGaps(map[string]int{labels.GapEpoch: 1})
}
