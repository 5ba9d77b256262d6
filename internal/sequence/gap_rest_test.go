package sequence

import (
	"testing"

	"github.com/tetherproxy/tether/internal/labels"
)

// A message held inside the timed gap splits it: when the timeout gives up
// the part before that message, the rest is timed anew and given up in its
// turn, rather than left holding the stream for ever.
func TestGapSplitByHeldMessageIsTimedToTheEnd(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicySkip}, false)
	h.burst(1, msg("a", 1), msg("a", 6), msg("a", 3))
	h.clock.Advance(testTimeout)
	h.expectGot(msg("a", 1), msg("a", 3))
	h.clock.Advance(testTimeout)
	h.stop()
	h.expectGot(msg("a", 1), msg("a", 3), msg("a", 6))
	h.expectGaps(map[string]int{labels.GapSkipped: 2})
}
