package demo

import (
	"slices"
	"testing"
)

func TestTracker(t *testing.T) {
	tests := []struct {
		name  string
		seqs  []int64
		kinds []seqKind
		want  tracker // counters only
		spans []span
	}{
		{
			name:  "in order from any start",
			seqs:  []int64{41, 42, 43},
			kinds: []seqKind{seqFirst, seqNext, seqNext},
			want:  tracker{events: 3},
		},
		{
			name:  "gap",
			seqs:  []int64{1, 2, 9, 10},
			kinds: []seqKind{seqFirst, seqNext, seqGap, seqNext},
			want:  tracker{events: 4, gaps: 1, missed: 6},
			spans: []span{{3, 8}},
		},
		{
			name:  "duplicates are not events",
			seqs:  []int64{1, 2, 2, 1, 3},
			kinds: []seqKind{seqFirst, seqNext, seqDuplicate, seqDuplicate, seqNext},
			want:  tracker{events: 3, duplicates: 2},
		},
		{
			name:  "late arrival splits its gap",
			seqs:  []int64{1, 7, 4, 4},
			kinds: []seqKind{seqFirst, seqGap, seqLate, seqDuplicate},
			want:  tracker{events: 3, gaps: 1, missed: 4, late: 1, duplicates: 1},
			spans: []span{{2, 3}, {5, 6}},
		},
		{
			name:  "late arrivals at the edges shrink and then remove the gap",
			seqs:  []int64{1, 4, 2, 3},
			kinds: []seqKind{seqFirst, seqGap, seqLate, seqLate},
			want:  tracker{events: 4, gaps: 1, late: 2},
		},
		{
			name:  "two gaps",
			seqs:  []int64{5, 8, 20},
			kinds: []seqKind{seqFirst, seqGap, seqGap},
			want:  tracker{events: 3, gaps: 2, missed: 2 + 11},
			spans: []span{{6, 7}, {9, 19}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tr tracker
			for i, seq := range tc.seqs {
				if o := tr.observe(seq); o.kind != tc.kinds[i] {
					t.Errorf("observe(%d) kind = %d, want %d", seq, o.kind, tc.kinds[i])
				}
			}
			got := tracker{events: tr.events, gaps: tr.gaps, missed: tr.missed, duplicates: tr.duplicates, late: tr.late}
			want := tc.want
			if got.events != want.events || got.gaps != want.gaps || got.missed != want.missed ||
				got.duplicates != want.duplicates || got.late != want.late {
				t.Errorf("counts = %+v, want %+v", got, want)
			}
			if !slices.Equal(tr.missing, tc.spans) {
				t.Errorf("missing = %v, want %v", tr.missing, tc.spans)
			}
		})
	}
}

func TestTrackerGapObservation(t *testing.T) {
	var tr tracker
	tr.observe(411)
	o := tr.observe(419)
	if o.kind != seqGap || o.gap != (span{412, 418}) || o.last != 411 || o.gap.len() != 7 {
		t.Errorf("observation = %+v, want gap 412-418 after 411", o)
	}
	if got := gapName(o.gap); got != "gap 412–418" {
		t.Errorf("gapName = %q", got)
	}
	if got := gapName(span{5, 5}); got != "gap 5" {
		t.Errorf("gapName single = %q", got)
	}
}

func TestTrackerBoundsMissingSpans(t *testing.T) {
	var tr tracker
	for i := int64(0); i <= maxMissingSpans+10; i++ {
		tr.observe(i * 2) // every other number missing
	}
	if len(tr.missing) != maxMissingSpans {
		t.Fatalf("len(missing) = %d, want the cap %d", len(tr.missing), maxMissingSpans)
	}
	if tr.missed != maxMissingSpans+10 {
		t.Errorf("missed = %d: forgetting a span must not forget its count", tr.missed)
	}
	if o := tr.observe(1); o.kind != seqDuplicate {
		t.Errorf("a number from a forgotten span = %d, want duplicate", o.kind)
	}
}
