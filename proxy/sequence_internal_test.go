package proxy

import (
	"testing"

	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/rules"
)

// The zero Sequences get the documented defaults, and sequencing stays off.
func TestSequencesDefaults(t *testing.T) {
	if d := seqRulesOf(Sequences{}); d.GapTimeout != DefaultGapTimeout || d.HoldMaxBytes != DefaultHoldMaxBytes || d.on {
		t.Errorf("zero Sequences: timeout %v, hold %d, on %v", d.GapTimeout, d.HoldMaxBytes, d.on)
	}
}

// Without a sequence number path nothing is sequenced, whatever else is
// set: the session forwards messages without reading them for sequencing.
func TestSequencesOffWithoutSeqPath(t *testing.T) {
	r := newRuleSet(nil, protocol.Rules{
		StreamPath: path(t, "channel"), SessionMatch: compile(t, `{"t":"welcome"}`), SessionPath: path(t, "s"),
	}, Sequences{})
	if r.seq.on || r.seq.fill || r.caps.ReadsUpstream {
		t.Fatalf("sequencing on without TETHER_SEQ_PATH: on %v, fill %v, reads upstream %v", r.seq.on, r.seq.fill, r.caps.ReadsUpstream)
	}
}

// seqRulesOf is the sequencing policy s of a Server with the zero rules.
func seqRulesOf(s Sequences) seqRules { return newRuleSet(nil, protocol.Rules{}, s).seq }

func compile(t testing.TB, pattern string) *rules.Matcher {
	m, err := rules.Compile(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func path(t testing.TB, p string) rules.Path {
	r, err := rules.ParsePath(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
