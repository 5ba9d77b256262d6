package sequence

import (
	"slices"
	"sync/atomic"

	"github.com/tetherproxy/tether/internal/labels"
)

var (
	gapOutcomes     = [...]string{labels.GapFilled, labels.GapResync, labels.GapClosed, labels.GapSkipped, labels.GapNotified, labels.GapEpoch, labels.GapRestart, labels.GapResyncFailed}
	recoveryMethods = [...]string{labels.RecoveryResume, labels.RecoveryHTTP, labels.RecoveryResync}
)

// Tally is the Metrics of one session's sequencing: it counts the
// duplicates, gaps and recoveries of that session, for its status, and
// passes every event on to Metrics, the Server's. The sequencing's
// deliverers (the upstream reader, gap timers, catch-ups) call it
// concurrently: its counts are atomic.
type Tally struct {
	Metrics
	duplicates atomic.Uint64
	gaps       [len(gapOutcomes)]atomic.Uint64
	recoveries [len(recoveryMethods)]atomic.Uint64
}

// DuplicateDropped counts a duplicate and passes it on.
func (t *Tally) DuplicateDropped() {
	t.duplicates.Add(1)
	t.Metrics.DuplicateDropped()
}

// Gap counts a gap by outcome and passes it on.
func (t *Tally) Gap(outcome string) {
	if i := slices.Index(gapOutcomes[:], outcome); i >= 0 {
		t.gaps[i].Add(1)
	}
	t.Metrics.Gap(outcome)
}

// Recovered counts a recovery by method and passes it on.
func (t *Tally) Recovered(method string) {
	if i := slices.Index(recoveryMethods[:], method); i >= 0 {
		t.recoveries[i].Add(1)
	}
	t.Metrics.Recovered(method)
}

// Counts returns what t counted so far: duplicates, gaps by outcome and
// recoveries by method (labels.Gap*, labels.Recovery*), leaving out those
// that never happened.
func (t *Tally) Counts() (duplicates uint64, gaps, recoveries map[string]uint64) {
	return t.duplicates.Load(), counts(gapOutcomes[:], t.gaps[:]), counts(recoveryMethods[:], t.recoveries[:])
}

func counts(names []string, n []atomic.Uint64) map[string]uint64 {
	m := map[string]uint64{}
	for i, name := range names {
		if v := n[i].Load(); v > 0 {
			m[name] = v
		}
	}
	return m
}
