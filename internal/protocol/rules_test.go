package protocol

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
	r := NewRules(Rules{
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
		want App
	}{
		{`{"op":"login","req":1,"channel":"x"}`, App{Kind: AppLogin, ReplyID: "1"}},
		{`{"op":"subscribe","channel":"a","req":"r2","id":"m"}`, App{Kind: AppSubscribe, Key: "a", Keyed: true, ReplyID: "r2"}},
		{`{"op":"unsubscribe","channel":{"n":1}}`, App{Kind: AppUnsubscribe, Key: `{"n":1}`, Keyed: true}},
		{`{"op":"subscribe"}`, App{Kind: AppSubscribe}},
		{`{"op":"order","id":7,"req":3}`, App{AckID: "7"}},
		{`{"op":"order","id":[7]}`, App{}},
		{`not json`, App{}},
	}
	for _, tc := range tests {
		if got := r.App([]byte(tc.msg)); got != tc.want {
			t.Errorf("App(%s) = %+v, want %+v", tc.msg, got, tc.want)
		}
	}
}

// With no rules, nothing reads the message: a message that every pattern
// would match is plain, and the protocol reads neither direction.
func TestNoRulesLookAtNothing(t *testing.T) {
	r := newRuleSet(Rules{})
	if r.app || r.upstream || r.acks || r.seq.fields.n != 0 {
		t.Fatalf("zero Rules turn on app %v, upstream %v, acks %v, fields %d", r.app, r.upstream, r.acks, r.seq.fields.n)
	}
	if caps := r.Capabilities(); caps.ReadsApp || caps.ReadsUpstream || caps.Sequences || caps.Confirm != nil || caps.HeartbeatReply != nil {
		t.Fatalf("zero Rules have capabilities %+v", caps)
	}
	if got := r.App([]byte(`{"op":"login","t":"sub"}`)); got != (App{}) {
		t.Errorf("App without rules = %+v", got)
	}
	// Acks need both variables.
	if newRuleSet(Rules{AckIDPath: path(t, "id")}).Capabilities().Acks {
		t.Error("acks on without AckMatch")
	}
}

func TestClassifyUpstream(t *testing.T) {
	r := NewRules(Rules{
		AuthOKMatch:          compile(t, `{"op":"login","ok":true}`),
		HideOnReconnectMatch: compile(t, `{"t":"welcome"}`),
		ReplyIDPath:          path(t, "id"),
		AckIDPath:            path(t, "id"),
		AckMatch:             compile(t, `{"t":"ack"}`),
	})
	tests := []struct {
		msg  string
		want Upstream
	}{
		{`{"op":"login","ok":true,"id":1}`, Upstream{LoginOK: true, ReplyID: "1"}},
		{`{"t":"welcome"}`, Upstream{Once: true}},
		{`{"t":"ack","id":"m1"}`, Upstream{ReplyID: "m1", Ack: true, AckID: "m1"}},
		{`{"t":"ack"}`, Upstream{}},
		{`{"result":null,"id":7}`, Upstream{ReplyID: "7"}},
	}
	for _, tc := range tests {
		if got := r.Upstream([]byte(tc.msg)); got != tc.want {
			t.Errorf("Upstream(%s) = %+v, want %+v", tc.msg, got, tc.want)
		}
	}
}

// BenchmarkClassifyApp: the per-message cost of the rules on the app side,
// none configured versus the docs/design.md example.
func BenchmarkClassifyApp(b *testing.B) {
	msg := []byte(`{"t":"msg","id":"m1","body":"` + string(make([]byte, 0, 64)) + `hello"}`)
	for name, r := range map[string]Protocol{
		"none": NewRules(Rules{}),
		"design-example": NewRules(Rules{
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
				r.App(msg)
			}
		})
	}
}

func TestIsPlainKey(t *testing.T) {
	for p, want := range map[string]bool{
		"seq": true, "channel_id": true, "séq": true, "data.seq": false, "params.0": false,
		"0": false, "a|b": false, "#": false, "a*": false, `a\.b`: false, "@this": false,
	} {
		if got := isPlainKey(p); got != want {
			t.Errorf("isPlainKey(%q) = %v, want %v", p, got, want)
		}
	}
}

// BenchmarkClassify reads a 1 KiB message for the docs/design.md example's rules,
// with the number near the end: one walk of the top level against a lookup
// per path.
func BenchmarkClassify(b *testing.B) {
	msg := []byte(`{"t":"event","channel":"a","data":{"px":"` + string(make([]byte, 900)) + `"},"session":"S","seq":123456}`)
	for i := range msg {
		if msg[i] == 0 {
			msg[i] = 'x'
		}
	}
	for _, tc := range []struct{ name, seq string }{{"one walk", "seq"}, {"lookups", "data|@this.seq"}} {
		b.Run(tc.name, func(b *testing.B) {
			r := newSeqRules(Rules{
				SeqPath: path(b, "seq"), StreamPath: path(b, "channel"),
				SessionMatch: compile(b, `{"t":"welcome"}`), SessionPath: path(b, "session"),
				ResyncMatch: compile(b, `{"t":"welcome","resync":true}`), ResyncSeqPath: path(b, tc.seq),
			})
			b.ReportAllocs()
			for b.Loop() {
				if in := r.classify(msg); !in.HasSeq {
					b.Fatal("no number")
				}
			}
		})
	}
}

// The rules protocol's capabilities follow its variables, and it states no
// framing, keepalive or replay rewriting: no variable asks for them.
func TestRulesCapabilities(t *testing.T) {
	welcome := compile(t, `{"t":"welcome"}`)
	tests := []struct {
		name  string
		rules Rules
		want  Capabilities // Confirm and HeartbeatReply compared as set or not
		live  [2]bool      // Confirm, HeartbeatReply set
	}{
		{name: "none"},
		{name: "login answered", rules: Rules{AuthMatch: compile(t, `{"op":"login"}`), AuthOKMatch: welcome},
			want: Capabilities{ReadsApp: true, ReadsUpstream: true, AwaitLogin: true}},
		{name: "acks need both", rules: Rules{AckMatch: compile(t, `{"t":"ack"}`)}},
		{name: "acks", rules: Rules{AckMatch: compile(t, `{"t":"ack"}`), AckIDPath: path(t, "id")},
			want: Capabilities{ReadsApp: true, ReadsUpstream: true, Acks: true}},
		{name: "sequences without a number path", rules: Rules{StreamPath: path(t, "c"), SessionMatch: welcome, SessionPath: path(t, "s")}},
		{name: "sequences", rules: Rules{SeqPath: path(t, "seq")},
			want: Capabilities{ReadsUpstream: true, Sequences: true}},
		{name: "named streams and sessions", rules: Rules{SeqPath: path(t, "seq"), StreamPath: path(t, "c"), SessionMatch: welcome, SessionPath: path(t, "s")},
			want: Capabilities{ReadsUpstream: true, Sequences: true, Streams: true, Sessions: true}},
		{name: "liveness only", rules: Rules{ConfirmMatch: welcome, HeartbeatReplyMatch: compile(t, `{"t":"pong"}`)}, live: [2]bool{true, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NewRules(tc.rules).Capabilities()
			if live := [2]bool{got.Confirm != nil, got.HeartbeatReply != nil}; live != tc.live {
				t.Errorf("Confirm, HeartbeatReply set: %v, want %v", live, tc.live)
			}
			if got.Framing != nil || got.Replay != nil || got.Keepalive.Answer != nil || got.Keepalive.Every != 0 {
				t.Errorf("rules state framing, replay or keepalive: %+v", got)
			}
			if flags(got) != flags(tc.want) {
				t.Errorf("Capabilities = %+v, want %+v", flags(got), flags(tc.want))
			}
		})
	}
	caps := NewRules(Rules{ConfirmMatch: welcome, HeartbeatReplyMatch: compile(t, `{"t":"pong"}`)}).Capabilities()
	if !caps.Confirm([]byte(`{"t":"welcome","v":1}`)) || caps.Confirm([]byte(`{"t":"pong"}`)) ||
		!caps.HeartbeatReply([]byte(`{"t":"pong"}`)) || caps.HeartbeatReply([]byte(`{"t":"welcome"}`)) {
		t.Error("Confirm and HeartbeatReply do not follow their patterns")
	}
}

// Upstream reads the sequence fields beside the hiding rules, sharing their
// scan, and only when a number path is set.
func TestClassifyUpstreamSequenced(t *testing.T) {
	r := NewRules(Rules{
		HideOnReconnectMatch: compile(t, `{"t":"welcome"}`), ReplyIDPath: path(t, "id"),
		SeqPath: path(t, "seq"), StreamPath: path(t, "channel"),
		SessionMatch: compile(t, `{"t":"welcome"}`), SessionPath: path(t, "session"),
		ResyncMatch: compile(t, `{"t":"snapshot"}`), ResyncSeqPath: path(t, "seq"),
		EpochPath: path(t, "epoch"),
	})
	tests := []struct {
		msg  string
		want Upstream
	}{
		{`{"t":"event","channel":"a","seq":7}`, Upstream{Seq: Fields{Seq: 7, HasSeq: true, Stream: "a"}}},
		{`{"t":"welcome","session":"S","id":1}`, Upstream{Once: true, ReplyID: "1", Seq: Fields{Session: "S", Captured: true}}},
		{`{"t":"snapshot","channel":"b","seq":40}`, Upstream{Seq: Fields{Seq: 40, HasSeq: true, Stream: "b", ResyncSeq: 40, Resync: true}}},
		{`{"t":"event","seq":"x"}`, Upstream{}},
		{`{"t":"event","channel":"a","seq":2,"epoch":"xyz"}`, Upstream{Seq: Fields{Seq: 2, HasSeq: true, Stream: "a", Epoch: "xyz"}}},
		{`not json`, Upstream{}},
	}
	for _, tc := range tests {
		if got := r.Upstream([]byte(tc.msg)); got != tc.want {
			t.Errorf("Upstream(%s) = %+v, want %+v", tc.msg, got, tc.want)
		}
	}
	if got := NewRules(Rules{SeqPath: path(t, "seq")}).Upstream([]byte(`{"seq":3,"t":"welcome"}`)); got != (Upstream{Seq: Fields{Seq: 3, HasSeq: true}}) {
		t.Errorf("sequence rules alone: %+v", got)
	}
	// The range and chain models' numbers, in Binance's and Deribit's
	// layouts (a nested path goes through gjson).
	binance := NewRules(Rules{SeqPath: path(t, "u"), SeqFirstPath: path(t, "U"), SeqPrevPath: path(t, "pu"), StreamPath: path(t, "s")})
	msg := `{"e":"depthUpdate","E":1,"s":"BTCUSDT","U":157,"u":160,"pu":149,"b":[["0.0024","10"]],"a":[]}`
	if got, want := binance.Upstream([]byte(msg)).Seq, (Fields{Seq: 160, HasSeq: true, Stream: "BTCUSDT", First: 157, HasFirst: true, Prev: 149, HasPrev: true}); got != want {
		t.Errorf("Binance depth: %+v, want %+v", got, want)
	}
	deribit := NewRules(Rules{SeqPath: path(t, "params.data.change_id"), SeqPrevPath: path(t, "params.data.prev_change_id"), StreamPath: path(t, "params.channel")})
	msg = `{"jsonrpc":"2.0","method":"subscription","params":{"channel":"book.BTC-PERPETUAL.raw","data":{"type":"change","change_id":109,"prev_change_id":104,"bids":[],"asks":[]}}}`
	if got, want := deribit.Upstream([]byte(msg)).Seq, (Fields{Seq: 109, HasSeq: true, Stream: "book.BTC-PERPETUAL.raw", Prev: 104, HasPrev: true}); got != want {
		t.Errorf("Deribit book: %+v, want %+v", got, want)
	}
}

func TestAppKindString(t *testing.T) {
	for k, want := range map[AppKind]string{AppPlain: "plain", AppLogin: "login", AppSubscribe: "subscribe",
		AppUnsubscribe: "unsubscribe", AppKeepalive: "keepalive", AppKind(9): "AppKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("AppKind(%d) = %q, want %q", k, got, want)
		}
	}
}

// capFlags are the yes-or-no capabilities.
type capFlags struct{ readsApp, readsUpstream, sequences, streams, sessions, awaitLogin, acks bool }

func flags(c Capabilities) capFlags {
	return capFlags{c.ReadsApp, c.ReadsUpstream, c.Sequences, c.Streams, c.Sessions, c.AwaitLogin, c.Acks}
}
