package protocol

import (
	"fmt"
	"testing"
)

// BenchmarkRules is the per-message cost of the message rules of the
// forwarding benchmarks' "all" set (login, subscribe and unsubscribe
// patterns, a subscription key and a reply id on the app side; a welcome
// pattern and the reply id on the upstream side) on a feed event that none
// of them matches, the common case: one scan of the top level against a
// Match per pattern and a Get per path (what the rules did before).
func BenchmarkRules(b *testing.B) {
	r := Rules{
		AuthMatch: compile(b, `{"op":"login"}`), SubscribeMatch: compile(b, `{"op":"subscribe"}`),
		UnsubscribeMatch: compile(b, `{"op":"unsubscribe"}`), SubscriptionKey: path(b, "channel"),
		ReplyIDPath: path(b, "id"), HideOnReconnectMatch: compile(b, `{"t":"welcome"}`),
	}
	rs := newRuleSet(r)
	for _, size := range []int{64, 1 << 10, 16 << 10} {
		msg := benchEvent(size)
		for _, tc := range []struct {
			name string
			run  func([]byte) bool
		}{
			{"app/scan", func(m []byte) bool { return rs.App(m) == App{} }},
			{"app/one-by-one", func(m []byte) bool { return refClassifyApp(r, m) == App{} }},
			{"upstream/scan", func(m []byte) bool { return !rs.Upstream(m).Hides() }},
			{"upstream/one-by-one", func(m []byte) bool { return !refClassifyUpstream(r, m).Hides() }},
		} {
			b.Run(fmt.Sprintf("%s/%dB", tc.name, size), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if !tc.run(msg) {
						b.Fatal("a rule matched the event")
					}
				}
			})
		}
	}
}

// benchEvent is a feed event of size bytes, as the forwarding benchmarks
// send: a type, a 16-digit sequence number and a padding string.
func benchEvent(size int) []byte {
	msg := []byte(`{"t":"event","seq":1000000000000042,"p":"`)
	for len(msg) < size-2 {
		msg = append(msg, 'x')
	}
	return append(msg, `"}`...)
}

// BenchmarkSeqFields is the cost of reading a sequenced message's fields in
// one pass, per model's paths, on a Binance-style depth event: number and
// stream alone (next), plus the first id (range) or the previous one
// (chain). It must not allocate.
func BenchmarkSeqFields(b *testing.B) {
	msg := []byte(`{"e":"depthUpdate","E":1672515782136,"s":"BNBBTC","U":157,"u":160,"pu":149,"b":[["0.0024","10"]],"a":[["0.0026","100"]]}`)
	for _, tc := range []struct {
		name string
		r    Rules
	}{
		{"next", Rules{SeqPath: path(b, "u"), StreamPath: path(b, "s")}},
		{"range", Rules{SeqPath: path(b, "u"), StreamPath: path(b, "s"), SeqFirstPath: path(b, "U")}},
		{"chain", Rules{SeqPath: path(b, "u"), StreamPath: path(b, "s"), SeqPrevPath: path(b, "pu")}},
	} {
		rs := newRuleSet(tc.r)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !rs.Upstream(msg).Seq.HasSeq {
					b.Fatal("no sequence number read")
				}
			}
		})
	}
}

// BenchmarkUpstream is the per-message cost of Upstream under the
// forwarding benchmarks' rule sets (proxy's BenchmarkForward): sequencing
// only, and all of a typical configuration, on the events they send. Under
// seq the number is found within the first bytes and nothing else is read;
// under all the reply id is looked for in the whole top level.
func BenchmarkUpstream(b *testing.B) {
	sets := []struct {
		name string
		r    Rules
	}{
		{"seq", Rules{SeqPath: path(b, "seq")}},
		{"all", Rules{
			SeqPath: path(b, "seq"), AuthMatch: compile(b, `{"op":"login"}`), SubscribeMatch: compile(b, `{"op":"subscribe"}`),
			UnsubscribeMatch: compile(b, `{"op":"unsubscribe"}`), SubscriptionKey: path(b, "channel"),
			ReplyIDPath: path(b, "id"), HideOnReconnectMatch: compile(b, `{"t":"welcome"}`),
		}},
	}
	for _, set := range sets {
		rs := newRuleSet(set.r)
		for _, size := range []int{64, 1 << 10} {
			msg := benchEvent(size)
			b.Run(fmt.Sprintf("rules=%s/%dB", set.name, size), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if u := rs.Upstream(msg); !u.Seq.HasSeq || u.Hides() {
						b.Fatal("the event was not read as a numbered, shown message")
					}
				}
			})
		}
	}
}
