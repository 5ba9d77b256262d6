package proxy

import (
	"testing"

	"github.com/tetherproxy/tether/internal/rules"
)

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

func TestClassifyApp(t *testing.T) {
	r := newRuleSet(Rules{
		AuthMatch:        compile(t, `{"op":"login"}`),
		SubscribeMatch:   compile(t, `re:"op":"(un)?subscribe"`),
		UnsubscribeMatch: compile(t, `re:"op":"unsubscribe"`),
		SubscriptionKey:  path(t, "channel"),
		ReplyIDPath:      path(t, "req"),
		AckIDPath:        path(t, "id"),
		AckMatch:         compile(t, `{"t":"ack"}`),
	})
	tests := []struct {
		msg  string
		want appClass
	}{
		{`{"op":"login","req":1,"channel":"x"}`, appClass{kind: appAuth, replyID: "1"}},
		{`{"op":"subscribe","channel":"a","req":"r2","id":"m"}`, appClass{kind: appSubscribe, key: "a", keyed: true, replyID: "r2"}},
		{`{"op":"unsubscribe","channel":{"n":1}}`, appClass{kind: appUnsubscribe, key: `{"n":1}`, keyed: true}},
		{`{"op":"subscribe"}`, appClass{kind: appSubscribe}},
		{`{"op":"order","id":7,"req":3}`, appClass{ackID: "7"}},
		{`{"op":"order","id":[7]}`, appClass{}},
		{`not json`, appClass{}},
	}
	for _, tc := range tests {
		if got := r.classifyApp([]byte(tc.msg)); got != tc.want {
			t.Errorf("classifyApp(%s) = %+v, want %+v", tc.msg, got, tc.want)
		}
	}
}

// With no rules, nothing reads the message: a message that every pattern
// would match is plain, and the upstream side is off.
func TestNoRulesLookAtNothing(t *testing.T) {
	r := newRuleSet(Rules{})
	if r.app || r.upstream || r.acks {
		t.Fatalf("zero Rules turn on app %v, upstream %v, acks %v", r.app, r.upstream, r.acks)
	}
	if got := r.classifyApp([]byte(`{"op":"login","t":"sub"}`)); got != (appClass{}) {
		t.Errorf("classifyApp without rules = %+v", got)
	}
	// Acks need both variables.
	if newRuleSet(Rules{AckIDPath: path(t, "id")}).acks {
		t.Error("acks on without AckMatch")
	}
}

func TestClassifyUpstream(t *testing.T) {
	r := newRuleSet(Rules{
		AuthOKMatch:          compile(t, `{"op":"login","ok":true}`),
		HideOnReconnectMatch: compile(t, `{"t":"welcome"}`),
		ReplyIDPath:          path(t, "id"),
		AckIDPath:            path(t, "id"),
		AckMatch:             compile(t, `{"t":"ack"}`),
	})
	tests := []struct {
		msg  string
		want upClass
	}{
		{`{"op":"login","ok":true,"id":1}`, upClass{authOK: true, replyID: "1"}},
		{`{"t":"welcome"}`, upClass{hideRepeat: true}},
		{`{"t":"ack","id":"m1"}`, upClass{replyID: "m1", ack: true, ackID: "m1"}},
		{`{"t":"ack"}`, upClass{}},
		{`{"result":null,"id":7}`, upClass{replyID: "7"}},
	}
	for _, tc := range tests {
		if got := r.classifyUpstream([]byte(tc.msg)); got != tc.want {
			t.Errorf("classifyUpstream(%s) = %+v, want %+v", tc.msg, got, tc.want)
		}
	}
}

// BenchmarkClassifyApp: the per-message cost of the rules on the app side,
// none configured versus the DESIGN.md example.
func BenchmarkClassifyApp(b *testing.B) {
	msg := []byte(`{"t":"msg","id":"m1","body":"` + string(make([]byte, 0, 64)) + `hello"}`)
	for name, r := range map[string]ruleSet{
		"none": newRuleSet(Rules{}),
		"design-example": newRuleSet(Rules{
			SubscribeMatch:   compile(b, `{"t":"sub"}`),
			UnsubscribeMatch: compile(b, `{"t":"unsub"}`),
			SubscriptionKey:  path(b, "channel"),
			AckIDPath:        path(b, "id"),
			AckMatch:         compile(b, `{"t":"ack"}`),
		}),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.classifyApp(msg)
			}
		})
	}
}
