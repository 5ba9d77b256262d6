package protocol

import (
	"slices"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/rules"
)

// ruleSetsUnderTest are rule sets the scan serves in different ways: plain
// keys shared between rules, a path that is not a key, regular expressions,
// an empty pattern, a nested pattern, and more keys than one scan reads.
func ruleSetsUnderTest(tb testing.TB) []Rules {
	return []Rules{
		{
			AuthMatch: compile(tb, `{"op":"login"}`), SubscribeMatch: compile(tb, `{"op":"subscribe"}`),
			UnsubscribeMatch: compile(tb, `{"op":"unsubscribe"}`), SubscriptionKey: path(tb, "channel"),
			ReplyIDPath: path(tb, "id"), HideOnReconnectMatch: compile(tb, `{"t":"welcome"}`),
			SeqPath: path(tb, "seq"), StreamPath: path(tb, "channel"),
			SessionMatch: compile(tb, `{"t":"welcome"}`), SessionPath: path(tb, "session"),
			ResyncMatch: compile(tb, `{"t":"welcome","resync":true}`), ResyncSeqPath: path(tb, "seq"),
		},
		{
			AuthMatch: compile(tb, `{"op":"login","user":{"name":"x"}}`), SubscribeMatch: compile(tb, `re:"op":"(un)?sub"`),
			UnsubscribeMatch: compile(tb, `re:"op":"unsub"`), SubscriptionKey: path(tb, "params.0"),
			ReplyIDPath: path(tb, "req"), AckIDPath: path(tb, "id"), AckMatch: compile(tb, `{"t":"ack"}`),
			AuthOKMatch: compile(tb, `{"op":"login","ok":true}`), HideOnReconnectMatch: compile(tb, `{}`),
			SubscriptionEndMatch: compile(tb, `re:"op":"(unsub|end)"`),
			AppPingMatch:         compile(tb, `{"op":"ping"}`), AppPongMessage: []byte(`{"op":"pong"}`),
		},
		{
			AuthMatch:      compile(tb, `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}`),
			SubscribeMatch: compile(tb, `{"s\u0075b":true}`), SubscriptionKey: path(tb, "k"),
			UnsubscribeMatch: compile(tb, `{"op":"un\u0073ub","n":1.0}`),
			AckIDPath:        path(tb, "id"), AckMatch: compile(tb, `{"t":"ack","ok":null}`),
			SubscriptionEndMatch: compile(tb, `{"t":"end"}`),
			AppPingMatch:         compile(tb, `re:^ping`), AppPongMessage: []byte("pong"),
		},
	}
}

// FuzzRuleScan holds the one-scan classification to what the rules say one
// by one (rules.Matcher.Match and rules.Path.Get for each), on any message.
func FuzzRuleScan(f *testing.F) {
	for _, msg := range []string{
		`{"op":"login","id":1,"channel":"a"}`, `{"op":"subscribe","channel":{"n":[1]},"id":"x"}`,
		`{"t":"ack","id":"m1","ok":null}`, `{"t":"welcome","req":2}`, `{"sub":true,"k":"a\"b"}`,
		`{"op":"login","user":{"name":"x","y":1},"ok":true,"req":7}`, `{"params":["a",1],"op":"unsub"}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}`, `{"t":"welc\u006fme","id":1e0}`,
		`{"op":"unsub","n":10e-1}`, `{"t":"welcome","session":"S","seq":5,"resync":true,"channel":"c"}`,
		`{"op":"ping","x":1}`, `{"op":"pong"}`, `pong`, `ping`, `{"t":"end","k":"z"}`, `{"op":"end","params":["b"]}`,
		`{"seq":1,"seq":2,"channel":"a\u00e9"}`, `{"op":"log\u0069n","id":"\u0031"}`, `{"op":"login","op":"x"}`, `{"op":"login"} {"x":1}`, `[{"op":"login"}]`, `x`,
	} {
		f.Add(msg)
	}
	sets := ruleSetsUnderTest(f)
	compiled := make([]*ruleSet, len(sets))
	for i, r := range sets {
		compiled[i] = newRuleSet(r)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		data := []byte(msg)
		for i, r := range sets {
			rs := compiled[i]
			if got, want := rs.App(data), refClassifyApp(r, data); got != want {
				t.Fatalf("rules %d, %q: App = %+v, one by one %+v", i, msg, got, want)
			}
			got := rs.Upstream(data)
			seq := got.Seq
			got.Seq = Fields{}
			if want := refClassifyUpstream(r, data); got != want {
				t.Fatalf("rules %d, %q: Upstream = %+v, one by one %+v", i, msg, got, want)
			}
			if want := rs.seq.classify(data); seq != want {
				t.Fatalf("rules %d, %q: sequence rules read from the shared scan %+v, alone %+v", i, msg, seq, want)
			}
		}
	})
}

// refClassifyApp is App as it was before the scan: a Match per pattern and
// a Get per path.
func refClassifyApp(r Rules, data []byte) App {
	acks := isSet(r.AckIDPath) && r.AckMatch != nil
	var c App
	switch {
	case r.AuthMatch.Match(data):
		c.Kind = AppLogin
	case r.UnsubscribeMatch.Match(data):
		c.Kind = AppUnsubscribe
	case r.SubscribeMatch.Match(data):
		c.Kind = AppSubscribe
	case r.AppPingMatch.Match(data):
		c.Kind = AppKeepalive
		return c
	case acks:
		c.AckID, _ = idOf(refGet(r.AckIDPath, data))
		return c
	default:
		return c
	}
	c.ReplyID, _ = idOf(refGet(r.ReplyIDPath, data))
	if c.Kind != AppLogin && isSet(r.SubscriptionKey) {
		c.Key, c.Keyed = keyOf(refGet(r.SubscriptionKey, data))
	}
	return c
}

// refClassifyUpstream is what the hiding rules said of an upstream message
// before the scan.
func refClassifyUpstream(r Rules, data []byte) Upstream {
	var c Upstream
	c.LoginOK = r.AuthOKMatch.Match(data)
	if c.Once = r.HideOnReconnectMatch.Match(data); c.Once {
		c.OnceKey, c.OnceKeyed = keyOf(refGet(r.SubscriptionKey, data))
	}
	c.ReplyID, _ = idOf(refGet(r.ReplyIDPath, data))
	if isSet(r.AckIDPath) && r.AckMatch.Match(data) {
		c.AckID, c.Ack = idOf(refGet(r.AckIDPath, data))
	}
	if isSet(r.SubscriptionKey) && r.SubscriptionEndMatch.Match(data) {
		c.EndKey, c.Ends = keyOf(refGet(r.SubscriptionKey, data))
	}
	if r.AppPingMatch != nil {
		if pong := string(r.AppPongMessage); strings.HasPrefix(pong, "{") {
			m, _ := rules.Compile(pong)
			c.KeepaliveReply = m.Match(data)
		} else {
			c.KeepaliveReply = string(data) == pong
		}
	}
	return c
}

func refGet(p rules.Path, data []byte) fieldValue {
	if !isSet(p) {
		return fieldValue{}
	}
	return valueOf(p.Get(data))
}

// The scan reads each pattern's keys, shared between rules, and gives up
// its filter rather than the rules when a pattern asks for too many.
func TestRuleScanKeys(t *testing.T) {
	sets := ruleSetsUnderTest(t)
	r := newRuleSet(sets[0])
	if got := strings.Join(r.appScan.keys, ","); got != "op,id,channel" {
		t.Errorf("app scan keys %q, want op,id,channel", got)
	}
	if got := strings.Join(r.upScan.keys, ","); got != "t,id,channel,seq,session" {
		t.Errorf("upstream scan keys %q, want t,id and the sequence rules' seq,channel,session", got)
	}
	if !r.seq.fields.shared {
		t.Error("the sequence rules do not share the upstream scan")
	}
	r = newRuleSet(sets[2])
	if r.auth.need != 0 {
		t.Errorf("a pattern of 9 keys filters on %08b, want no filter", r.auth.need)
	}
	if r.subscribe.need == 0 || !slices.Contains(r.appScan.keys, "sub") {
		t.Errorf("escaped pattern key: keys %q, need %08b", r.appScan.keys, r.subscribe.need)
	}
}

// An id read from the scan is the caller's to keep: it does not change when
// the message buffer is reused.
func TestRuleScanCopiesIDs(t *testing.T) {
	r := newRuleSet(Rules{AckIDPath: path(t, "id"), AckMatch: compile(t, `{"t":"ack"}`), ReplyIDPath: path(t, "req")})
	data := []byte(`{"t":"ack","id":"m1","req":7}`)
	c := r.Upstream(data)
	copy(data, strings.Repeat("x", len(data)))
	if c.AckID != "m1" || c.ReplyID != "7" || !c.Ack {
		t.Fatalf("after reuse of the message: %+v", c)
	}
}
