package sequence

import (
	"context"
	"testing"

	"github.com/tetherproxy/tether/buffer"
)

// discardApp is an App that drops everything.
type discardApp struct{}

func (discardApp) Deliver([]buffer.SeqMessage) {}
func (discardApp) Flush()                      {}
func (discardApp) Close(int, string)           {}

// BenchmarkSequencer offers in-order messages of one stream, flushing every
// 16 as the upstream reader does at the end of a burst: the hot path, which
// must not allocate or read the clock. It runs under each model, each
// message in order by its definition: next numbers one apart; range events
// folding 1 to 4 updates (Binance depth); chain links naming the previous
// number, 1 to 4 below (Deribit); increasing numbers 1 to 4 apart.
func BenchmarkSequencer(b *testing.B) {
	for _, model := range []buffer.Model{buffer.ModelNext, buffer.ModelRange, buffer.ModelChain, buffer.ModelIncreasing} {
		b.Run(model.String(), func(b *testing.B) {
			s := New(context.Background(), Options{Config: Config{Model: model}, App: discardApp{}})
			defer s.Stop()
			m := buffer.Message{Data: []byte(`{"t":"event","seq":1}`)}
			f := Fields{HasSeq: true, HasFirst: true, HasPrev: true}
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				step := int64(1)
				if model != buffer.ModelNext {
					step += f.Seq % 4
				}
				f.First, f.Prev = f.Seq+1, f.Seq
				f.Seq += step
				s.Offer(1, m, false, f)
				if n++; n%16 == 0 {
					s.Flush()
				}
			}
			s.Flush()
		})
	}
}

// BenchmarkSequencerEventIDs is the next model's in-order path with and
// without naming each message for an sse:// app (Config.EventIDs): the
// name's cost is one string per numbered message.
func BenchmarkSequencerEventIDs(b *testing.B) {
	for _, named := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[named], func(b *testing.B) {
			s := New(context.Background(), Options{Config: Config{EventIDs: named}, App: discardApp{}})
			defer s.Stop()
			m := buffer.Message{Data: []byte(`{"ch":"prices","seq":1}`)}
			f := Fields{HasSeq: true, Stream: "prices"}
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				f.Seq++
				s.Offer(1, m, false, f)
				if n++; n%16 == 0 {
					s.Flush()
				}
			}
			s.Flush()
		})
	}
}
