package proxy

import "github.com/tetherproxy/tether/internal/protocol"

// ruleSet is what a Server's sessions consult about messages: its protocol
// (Options.Protocol, or the rules protocol of Options.Rules), that
// protocol's capabilities, decided once, and the sequencing policy
// (Options.Sequences).
type ruleSet struct {
	proto protocol.Protocol
	caps  protocol.Capabilities
	seq   seqRules
}

func newRuleSet(p protocol.Protocol, r protocol.Rules, s Sequences) ruleSet {
	if p == nil {
		p = protocol.NewRules(r)
	}
	caps := p.Capabilities()
	return ruleSet{proto: p, caps: caps, seq: newSeqRules(s, r, caps)}
}
