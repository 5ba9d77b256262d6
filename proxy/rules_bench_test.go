package proxy

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
			{"app/scan", func(m []byte) bool { return rs.classifyApp(m) == appClass{} }},
			{"app/one-by-one", func(m []byte) bool { return refClassifyApp(r, m) == appClass{} }},
			{"upstream/scan", func(m []byte) bool { return !rs.classifyUpstream(m).any() }},
			{"upstream/one-by-one", func(m []byte) bool { return !refClassifyUpstream(r, m).any() }},
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
