package sequence

import (
	"testing"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/labels"
)

// The gap timer fires exactly TETHER_GAP_TIMEOUT after the gap opened: a
// nanosecond before, nothing has happened; at the timeout, the policy.
func TestGapTimerFiresAtTimeout(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicyClose}, false)
	h.burst(1, msg("", 1), msg("", 3))
	h.expectGot(msg("", 1))

	h.clock.Advance(testTimeout - time.Nanosecond)
	if h.app.closeCode != 0 {
		t.Fatalf("app closed %v after the gap opened, before the %v timeout", testTimeout-time.Nanosecond, testTimeout)
	}
	h.expectGaps(map[string]int{})

	h.clock.Advance(time.Nanosecond)
	if h.app.closeCode != CloseUnrecoverable || h.app.closeReason != "unrecoverable gap: missing 2-2" {
		t.Fatalf("at the timeout: app closed with %d %q, want %d %q", h.app.closeCode, h.app.closeReason,
			CloseUnrecoverable, "unrecoverable gap: missing 2-2")
	}
	h.expectGaps(map[string]int{labels.GapClosed: 1})
}

// Each TETHER_GAP_POLICY, applied to a gap not filled in time: close ends
// the app (after what was delivered before the gap) and delivers nothing
// more; skip delivers what was held and carries on; notify does the same
// after the rendered notice. Each is logged and counted once.
func TestGapPolicies(t *testing.T) {
	const notice = `{"t":"gap","stream":{{json .Stream}},"from":{{.From}},"to":{{.To}}}`
	tests := []struct {
		policy  Policy
		want    []string
		outcome string
		line    string
	}{
		{PolicyClose, []string{"a/1"}, labels.GapClosed, "unrecoverable gap, closing app"},
		{PolicySkip, []string{"a/1", "a/4", "a/5", "a/6"}, labels.GapSkipped, "gap given up, skipped"},
		{PolicyNotify, []string{"a/1", `{"t":"gap","stream":"a","from":2,"to":3}`, "a/4", "a/5", "a/6"},
			labels.GapNotified, "gap given up, app notified"},
	}
	for _, tc := range tests {
		t.Run(tc.policy.String(), func(t *testing.T) {
			cfg := Config{Policy: tc.policy}
			if tc.policy == PolicyNotify {
				cfg.Notice = mustNotice(t, notice)
			}
			h := newHarness(t, cfg, false)
			h.burst(1, "a/1", "a/4", "a/5")
			h.clock.Advance(testTimeout)
			h.burst(1, "a/6")
			h.expectGot(tc.want...)
			h.expectGaps(map[string]int{tc.outcome: 1})
			if n := h.logged(tc.line); n != 1 {
				t.Errorf("%d lines %q, want 1", n, tc.line)
			}
			closed := tc.policy == PolicyClose
			if got := h.app.closeCode == CloseUnrecoverable; got != closed {
				t.Errorf("app closed with %d %q; want closed: %v", h.app.closeCode, h.app.closeReason, closed)
			}
			if closed && h.app.closeReason != "unrecoverable gap in stream a: missing 2-3" {
				t.Errorf("close reason %q", h.app.closeReason)
			}
			h.stop()
			if _, _, _, held := h.metrics.snapshot(); held != 0 {
				t.Errorf("held bytes gauge at %d after Stop, want 0", held)
			}
		})
	}
}

// Under the close policy, the messages delivered before the gap reach the
// app before its close frame: the App's batch is flushed first.
func TestCloseFlushesFirst(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicyClose, HoldMaxBytes: 1}, false)
	// The hold buffer takes nothing: 4 gives gap 3 up at once, in the
	// reader's turn that delivered 1 and 2, before its Flush.
	h.burst(1, msg("", 1), msg("", 2), msg("", 4))
	if h.app.unflushed != 0 {
		t.Fatalf("%d messages still batched when the app was closed", h.app.unflushed)
	}
	h.expectGot(msg("", 1), msg("", 2))
	if h.app.closeReason != "unrecoverable gap: missing 3-3" {
		t.Fatalf("close reason %q", h.app.closeReason)
	}
}

// A held message the hold buffer has no room for gets the policy at once,
// as if its gap had timed out, without waiting for the timer.
func TestHoldFullGivesUpAtOnce(t *testing.T) {
	// Room for one held message: its payload plus the overhead.
	h := newHarness(t, Config{Policy: PolicySkip, HoldMaxBytes: len(msg("", 3)) + buffer.HeldOverhead}, false)
	h.burst(1, msg("", 1), msg("", 3), msg("", 5))
	h.expectGot(msg("", 1), msg("", 3))
	h.expectGaps(map[string]int{labels.GapSkipped: 1})
	if n := h.logs.FilterField(fieldReason(whyHoldFull)).Len(); n != 1 {
		t.Fatalf("%d lines with reason %q, want 1", n, whyHoldFull)
	}
	// 5 waits behind 4, timed in full from now.
	h.clock.Advance(testTimeout - time.Nanosecond)
	h.expectGot(msg("", 1), msg("", 3))
	h.clock.Advance(time.Nanosecond)
	h.expectGot(msg("", 1), msg("", 3), msg("", 5))
	h.expectGaps(map[string]int{labels.GapSkipped: 2})
}

// A held message the memory budget has no room for gets the policy at once,
// as one beyond TETHER_HOLD_MAX_BYTES does, logged with the budget as its
// reason; the account holds what the hold buffer holds.
func TestBudgetFullGivesUpAtOnce(t *testing.T) {
	for _, policy := range []Policy{PolicySkip, PolicyClose} {
		t.Run(policy.String(), func(t *testing.T) {
			// The budget has room for one held message: its payload plus
			// the overhead.
			one := int64(len(msg("", 3)) + buffer.HeldOverhead)
			mem, err := budget.New(budget.Options{Limit: one, Share: one, Sessions: 1})
			if err != nil {
				t.Fatal(err)
			}
			acct := mem.Open()
			h := newMeteredHarness(t, Config{Policy: policy}, false, acct)
			h.burst(1, msg("", 1), msg("", 3))
			if acct.Held() != one {
				t.Fatalf("account holds %d with one message held, want %d", acct.Held(), one)
			}
			h.burst(1, msg("", 5))
			if n := h.logs.FilterField(fieldReason(whyBudgetFull)).Len(); n != 1 {
				t.Fatalf("%d lines with reason %q, want 1", n, whyBudgetFull)
			}
			if policy == PolicyClose {
				h.expectGaps(map[string]int{labels.GapClosed: 1})
				if h.app.closeCode != CloseUnrecoverable {
					t.Fatalf("app closed with %d, want %d", h.app.closeCode, CloseUnrecoverable)
				}
				return
			}
			h.expectGot(msg("", 1), msg("", 3))
			h.expectGaps(map[string]int{labels.GapSkipped: 1})
			if acct.Held() != one {
				t.Fatalf("account holds %d with 5 held, want %d", acct.Held(), one)
			}
			h.burst(1, msg("", 4))
			h.expectGot(msg("", 1), msg("", 3), msg("", 4), msg("", 5))
			if acct.Held() != 0 {
				t.Fatalf("account holds %d with nothing held", acct.Held())
			}
		})
	}
}

// When the first gap of a stream is given up and another remains, that one
// gets a full timeout of its own from then.
func TestNextGapTimedInFull(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, false)
	h.burst(1, msg("", 1), msg("", 3))
	h.clock.Advance(testTimeout / 2)
	h.burst(1, msg("", 6)) // a second hole, 4-5, behind the first
	h.clock.Advance(testTimeout / 2)
	h.expectGot(msg("", 1), msg("", 3))
	h.clock.Advance(testTimeout - time.Nanosecond)
	h.expectGot(msg("", 1), msg("", 3))
	h.clock.Advance(time.Nanosecond)
	h.expectGot(msg("", 1), msg("", 3), msg("", 6))
	h.expectGaps(map[string]int{labels.GapSkipped: 2})
}

// A gap the live stream fills in time ends with its timer: nothing happens
// at the timeout, and the fill is counted once.
func TestGapFilledLiveStopsTimer(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicyClose}, false)
	h.burst(1, msg("", 1), msg("", 3))
	h.clock.Advance(time.Second)
	h.burst(1, msg("", 2))
	if n := h.clock.armed(); n != 0 {
		t.Fatalf("%d timers armed after the gap was filled", n)
	}
	h.clock.Advance(testTimeout)
	h.expectGot(msg("", 1), msg("", 2), msg("", 3))
	h.expectGaps(map[string]int{labels.GapFilled: 1})
	h.expectRecovered(map[string]int{}) // the live stream is no recovery method
	if h.app.closeCode != 0 {
		t.Fatalf("app closed with %d", h.app.closeCode)
	}
	lines := h.logs.FilterMessage("gap filled").All()
	if len(lines) != 1 || lines[0].ContextMap()["duration"] != time.Second || lines[0].ContextMap()["method"] != "live" {
		t.Fatalf("gap filled lines: %v", lines)
	}
}

// A hidden message held behind a gap stays hidden when it is released.
func TestHiddenHeldStaysHidden(t *testing.T) {
	h := newHarness(t, Config{}, false)
	h.s.Offer(1, msgData(msg("", 1)), false, fieldsOf(msg("", 1)))
	h.s.Offer(1, msgData(msg("", 3)), true, fieldsOf(msg("", 3)))
	h.s.Offer(1, msgData(msg("", 2)), false, fieldsOf(msg("", 2)))
	h.s.Offer(1, msgData(msg("", 4)), false, fieldsOf(msg("", 4)))
	h.s.Flush()
	h.expectGot(msg("", 1), msg("", 2), msg("", 4))
}
