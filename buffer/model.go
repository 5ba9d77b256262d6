package buffer

import (
	"fmt"
	"strconv"
)

// Model is how a feed numbers its messages, which decides when an item
// follows the last one delivered (TETHER_SEQ_MODEL, docs/sequences.md).
// With L the stream's last delivered number, an item numbered Seq <= L is a
// duplicate (or stale) under every model; above L it follows when:
type Model int

const (
	// ModelNext: Seq = L+1. One number per message (the default).
	ModelNext Model = iota
	// ModelRange: First <= L+1, where the item covers the numbers First to
	// Seq (Binance spot depth's U and u): an event that folds several
	// updates is not a gap, one that starts past L+1 is.
	ModelRange
	// ModelChain: First = L+1, where First is the item's previous number
	// plus one (Deribit's prev_change_id, Binance futures' pu): numbers
	// need not be consecutive, each item names its predecessor.
	ModelChain
	// ModelIncreasing: always. Any larger number is in order: duplicates
	// and items arriving after a larger one are dropped, but a gap cannot
	// be seen, so nothing is ever held.
	ModelIncreasing
)

var modelNames = [...]string{ModelNext: "next", ModelRange: "range", ModelChain: "chain", ModelIncreasing: "increasing"}

// String returns next, range, chain or increasing.
func (m Model) String() string {
	if m < 0 || int(m) >= len(modelNames) {
		return "Model(" + strconv.Itoa(int(m)) + ")"
	}
	return modelNames[m]
}

// UnmarshalText parses next, range, chain or increasing.
func (m *Model) UnmarshalText(text []byte) error {
	for i, name := range modelNames {
		if string(text) == name {
			*m = Model(i)
			return nil
		}
	}
	return fmt.Errorf("unknown sequence model %q: want next, range, chain or increasing", text)
}

// first is the lowest number it covers: its First under the models that
// read one, its Seq under the others.
func (t *Tracker) first(it SeqMessage) int64 {
	if t.model == ModelRange || t.model == ModelChain {
		return it.First
	}
	return it.Seq
}

// follows reports whether it, numbered above L, is delivered next.
func (t *Tracker) follows(s *seqStream, it SeqMessage) bool {
	switch t.model {
	case ModelRange:
		return it.First <= s.last+1
	case ModelChain:
		// it.Seq = L+1: no number can be missing before it, whatever its
		// predecessor says.
		return it.First == s.last+1 || it.Seq == s.last+1
	case ModelIncreasing:
		return true
	}
	return it.Seq == s.last+1
}

// gapEnd is the last number missing before it, held above L+1: the number
// before its first. A chain item whose predecessor is below L broke the
// chain; its gap is L+1 to its number minus one, so that it still names a
// range to give up.
func (t *Tracker) gapEnd(s *seqStream, it SeqMessage) int64 {
	return min(max(t.first(it)-1, s.last+1), it.Seq-1)
}
