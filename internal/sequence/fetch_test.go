package sequence

import (
	"errors"
	"testing"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
)

// A gap is fetched at once, for the numbers missing, in the latest captured
// session, with the gap's deadline; the answer fills it, which counts as a
// recovery over HTTP, and the timer is stopped.
func TestCatchUpFillsGap(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicyClose}, true)
	h.s.Offer(1, msgData("welcome"), false, Fields{Session: "S", Captured: true})
	h.burst(1, "a/1", "a/4")
	c := h.nextFetch()
	want := FetchRequest{Gap: buffer.Gap{Stream: "a", From: 2, To: 3}, Session: "S", Deadline: h.start.Add(testTimeout)}
	if c.req != want {
		t.Fatalf("catch-up of %+v, want %+v", c.req, want)
	}
	h.reply(c, "a/2", "a/3")
	h.expectGot("welcome", "a/1", "a/2", "a/3", "a/4")
	h.expectGaps(map[string]int{labels.GapFilled: 1})
	h.expectRecovered(map[string]int{labels.RecoveryHTTP: 1})
	h.clock.Advance(2 * testTimeout)
	if h.app.closeCode != 0 {
		t.Fatalf("app closed with %d after the gap was filled", h.app.closeCode)
	}
}

// A catch-up that answers after its deadline is not used: by then the
// policy has given the gap up, and the answer's messages are neither
// delivered nor counted as duplicates. The failure is logged, and the next
// gap of the stream is left to its timeout.
func TestLateCatchUpIgnored(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, true)
	h.burst(1, "a/1", "a/3", "a/6") // gaps 2 and 4-5; one catch-up at a time
	c := h.nextFetch()
	if c.req.Gap.From != 2 || c.req.Gap.To != 2 {
		t.Fatalf("first catch-up of %+v, want 2-2", c.req.Gap)
	}
	h.clock.Advance(testTimeout)
	h.expectGot("a/1", "a/3") // 2 skipped; 4-5 timed from now

	h.reply(c, "a/2")
	h.expectGot("a/1", "a/3")
	if dups, _, _, _ := h.metrics.snapshot(); dups != 0 {
		t.Fatalf("%d duplicates counted from the late answer", dups)
	}
	failed := h.logs.FilterMessage("gap fetch failed").All()
	if len(failed) != 1 || failed[0].ContextMap()["error"] != errLate.Error() {
		t.Fatalf("gap fetch failed lines: %v", failed)
	}
	if h.fetching("a") {
		t.Fatal("4-5 fetched after a catch-up of the stream failed")
	}
	h.clock.Advance(testTimeout)
	h.expectGot("a/1", "a/3", "a/6")
	h.expectGaps(map[string]int{labels.GapSkipped: 2})
}

// A snapshot resetting the stream while its gap is being fetched ends the
// gap (counted as a resync), drops what it held, and cancels the catch-up,
// whose end is not reported as a failure.
func TestResyncDuringCatchUp(t *testing.T) {
	h := newHarness(t, Config{}, true)
	h.burst(1, "a/1", "a/3")
	c := h.nextFetch()
	h.burst(1, snapshot("a", 10), "a/11")
	select {
	case <-c.ctx.Done():
	default:
		t.Fatal("catch-up not cancelled by the resync")
	}
	h.stop() // the cancelled catch-up's goroutine ends its turn
	h.expectGot("a/1", snapshot("a", 10), "a/11")
	h.expectGaps(map[string]int{labels.GapResync: 1})
	h.expectRecovered(map[string]int{labels.RecoveryResync: 1})
	resynced := h.logs.FilterMessage("stream resynced").All()
	if len(resynced) != 1 || resynced[0].ContextMap()["held_dropped"] != int64(1) {
		t.Fatalf("stream resynced lines: %v", resynced)
	}
	if n := h.logged("gap fetch failed"); n != 0 {
		t.Fatalf("the cancelled catch-up logged %d failures", n)
	}
	h.expectNoFetchStarted()
}

// Messages held behind several holes are released in order as the fill
// arrives in pieces: part of a catch-up, the live stream, then a catch-up
// answering out of order.
func TestFillArrivesInPieces(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicyClose}, true)
	h.burst(1, "a/1", "a/5", "a/6", "a/9") // holes 2-4 and 7-8
	first := h.nextFetch()
	if g := first.req.Gap; g.From != 2 || g.To != 4 {
		t.Fatalf("first catch-up of %+v, want 2-4", g)
	}
	h.reply(first, "a/2", "a/3") // a partial answer
	h.expectGot("a/1", "a/2", "a/3")

	second := h.nextFetch() // what was found meanwhile, and not delivered since
	if g := second.req.Gap; g.From != 5 || g.To != 8 {
		t.Fatalf("second catch-up of %+v, want 5-8", g)
	}
	h.burst(1, "a/4") // the live stream ends the first gap
	h.expectGot("a/1", "a/2", "a/3", "a/4", "a/5", "a/6")

	h.reply(second, "a/8", "a/7")
	h.expectGot("a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7", "a/8", "a/9")
	h.expectGaps(map[string]int{labels.GapFilled: 2})
	h.expectRecovered(map[string]int{labels.RecoveryHTTP: 1})
	if h.app.closeCode != 0 {
		t.Fatalf("app closed with %d", h.app.closeCode)
	}
}

// A hole found when little of the gap's timeout is left is fetched with a
// timeout of its own, rather than a deadline it could not meet.
func TestLateHoleFetchedWithOwnDeadline(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, true)
	h.burst(1, "a/1", "a/3")
	h.reply(h.nextFetch()) // answered, but empty: 2 is still missing
	h.clock.Advance(testTimeout * 8 / 10)
	h.burst(1, "a/6") // a new hole, 4-5
	c := h.nextFetch()
	want := FetchRequest{Gap: buffer.Gap{Stream: "a", From: 4, To: 5}, Deadline: h.start.Add(testTimeout * 18 / 10)}
	if c.req != want {
		t.Fatalf("catch-up of %+v, want %+v", c.req, want)
	}
}

// A failed catch-up is logged with what failed, and no other is made
// until the next gap is timed.
func TestCatchUpFailureStopsFetching(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, true)
	h.burst(1, "a/1", "a/3")
	h.answer(h.nextFetch(), fetchAnswer{err: errors.New("gapfill: HTTP 503")})
	h.burst(1, "a/6") // a new hole: not fetched after the failure
	if h.fetching("a") {
		t.Fatal("a hole fetched after a catch-up of the stream failed")
	}
	if n := h.logged("gap fetch failed"); n != 1 {
		t.Fatalf("%d gap fetch failed lines, want 1", n)
	}
	h.clock.Advance(testTimeout) // 2 skipped; 4-5 timed, and fetched
	if g := h.nextFetch().req.Gap; g.From != 4 || g.To != 5 {
		t.Fatalf("catch-up of %+v after the next gap was timed, want 4-5", g)
	}
}
