package sequence

import (
	"reflect"
	"testing"

	"github.com/tetherproxy/tether/internal/labels"
)

// passedOn is the Server's Metrics as a Tally sees them: what reached it.
type passedOn struct{ duplicates, gaps, recoveries int }

func (p *passedOn) DuplicateDropped()    { p.duplicates++ }
func (p *passedOn) Gap(string)           { p.gaps++ }
func (p *passedOn) Recovered(string)     { p.recoveries++ }
func (p *passedOn) HeldBytesChanged(int) {}

// A Tally counts each event of its session by label and passes every one
// on, an outcome it has no counter for included; what never happened is
// not in its counts.
func TestTally(t *testing.T) {
	p := &passedOn{}
	tl := Tally{Metrics: p}
	if d, g, r := tl.Counts(); d != 0 || len(g) != 0 || len(r) != 0 {
		t.Fatalf("a new tally counts %d, %v, %v", d, g, r)
	}
	tl.DuplicateDropped()
	tl.DuplicateDropped()
	tl.Gap(labels.GapFilled)
	tl.Gap(labels.GapSkipped)
	tl.Gap(labels.GapFilled)
	tl.Gap("unheard-of")
	tl.Recovered(labels.RecoveryHTTP)
	d, g, r := tl.Counts()
	if d != 2 || !reflect.DeepEqual(g, map[string]uint64{labels.GapFilled: 2, labels.GapSkipped: 1}) ||
		!reflect.DeepEqual(r, map[string]uint64{labels.RecoveryHTTP: 1}) {
		t.Errorf("counts %d, %v, %v", d, g, r)
	}
	if *p != (passedOn{duplicates: 2, gaps: 4, recoveries: 1}) {
		t.Errorf("passed on %+v, want every event", *p)
	}
}
