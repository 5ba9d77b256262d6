package protocol

import (
	"bytes"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/template"
)

// TETHER_SUBSCRIPTION_END_MATCH: an upstream message matching it ends the
// subscription whose key it carries at TETHER_SUBSCRIPTION_KEY; without a
// key there, it ends nothing.
func TestRulesSubscriptionEnd(t *testing.T) {
	r := NewRules(Rules{
		SubscribeMatch: compile(t, `{"type":"subscribe"}`), SubscriptionKey: path(t, "id"),
		SubscriptionEndMatch: compile(t, `re:"type":"(complete|error)"`),
	})
	if c := r.Capabilities(); !c.ReadsUpstream {
		t.Fatal("an end pattern does not read the upstream")
	}
	for msg, want := range map[string]Upstream{
		`{"type":"complete","id":"cd"}`:        {Ends: true, EndKey: "cd"},
		`{"id":7,"type":"error","payload":[]}`: {Ends: true, EndKey: "7"},
		`{"type":"complete"}`:                  {},
		`{"type":"next","id":"cd"}`:            {},
	} {
		if got := r.Upstream([]byte(msg)); got != want {
			t.Errorf("Upstream(%s) = %+v, want %+v", msg, got, want)
		}
	}
	// Without a key the pattern cannot name what it ends: it is off.
	if r := NewRules(Rules{SubscriptionEndMatch: compile(t, `{"type":"complete"}`)}); r.Capabilities().ReadsUpstream {
		t.Error("an end pattern without a key reads the upstream")
	}
}

// TETHER_APP_PING_MATCH and TETHER_APP_PONG_MESSAGE: the app's ping is a
// keepalive answered with the pong; the upstream's answer is a pong like
// it, as a pattern for a JSON object, byte for byte otherwise.
func TestRulesAppPing(t *testing.T) {
	r := NewRules(Rules{
		AppPingMatch: compile(t, `{"type":"ping"}`), AppPongMessage: []byte(`{"type":"pong"}`),
		SubscribeMatch: compile(t, `{"type":"subscribe"}`),
	})
	c := r.Capabilities()
	if c.Keepalive.Answer == nil || c.Keepalive.Every != 0 {
		t.Fatalf("Keepalive = %+v, want an answer and no beat", c.Keepalive)
	}
	if m := c.Keepalive.Answer([]byte(`{"type":"ping"}`)); m.Op != ws.OpText || string(m.Data) != `{"type":"pong"}` {
		t.Errorf("Answer = %v %s", m.Op, m.Data)
	}
	if got := r.App([]byte(`{"type":"ping","payload":{}}`)); got.Kind != AppKeepalive {
		t.Errorf("App(ping) = %+v, want a keepalive", got)
	}
	if got := r.App([]byte(`{"type":"subscribe"}`)); got.Kind != AppSubscribe {
		t.Errorf("App(subscribe) = %+v", got)
	}
	for msg, want := range map[string]bool{`{"type":"pong"}`: true, `{"payload":1,"type":"pong"}`: true, `{"type":"ping"}`: false, `pong`: false} {
		if got := r.Upstream([]byte(msg)).KeepaliveReply; got != want {
			t.Errorf("Upstream(%s).KeepaliveReply = %v, want %v", msg, got, want)
		}
	}
	text := NewRules(Rules{AppPingMatch: compile(t, `re:^PING$`), AppPongMessage: []byte("PONG")})
	for msg, want := range map[string]bool{"PONG": true, "PONG ": false, `{"PONG":1}`: false} {
		if got := text.Upstream([]byte(msg)).KeepaliveReply; got != want {
			t.Errorf("text pong: Upstream(%q).KeepaliveReply = %v, want %v", msg, got, want)
		}
	}
}

// TETHER_APP_KEEPALIVE_MESSAGE and _INTERVAL become the beat.
func TestRulesAppKeepalive(t *testing.T) {
	c := NewRules(Rules{AppKeepaliveMessage: []byte(`{"type":"ka"}`), AppKeepaliveInterval: 25 * time.Second}).Capabilities()
	if c.Keepalive.Every != 25*time.Second || string(c.Keepalive.Beat.Data) != `{"type":"ka"}` || c.Keepalive.Beat.Op != ws.OpText || c.Keepalive.Answer != nil {
		t.Errorf("Keepalive = %+v", c.Keepalive)
	}
	if c := NewRules(Rules{}).Capabilities(); c.Keepalive.Every != 0 || c.Keepalive.Answer != nil || c.Framing != nil || c.Replay != nil {
		t.Errorf("zero Rules: %+v", c)
	}
}

// TETHER_FRAMING=ndjson splits text messages into their records; blank
// records separate, a message with none and binary messages pass whole.
func TestNDJSONFramer(t *testing.T) {
	split := NewRules(Rules{Framing: FramingNDJSON}).Capabilities().Framing
	if split == nil {
		t.Fatal("no framer")
	}
	fr := split()
	cases := []struct {
		op   ws.OpCode
		in   string
		want []string
	}{
		{ws.OpText, `{"connect":{}}` + "\n" + `{"subscribe":{}}`, []string{`{"connect":{}}`, `{"subscribe":{}}`}},
		{ws.OpText, "a\r\n\n  \nb\n", []string{"a", "b"}},
		{ws.OpText, "one", []string{"one"}},
		{ws.OpText, "", []string{""}},
		{ws.OpText, "\n \n", []string{"\n \n"}},
		{ws.OpBinary, "a\nb", []string{"a\nb"}},
	}
	for _, c := range cases {
		got, err := fr.Split(c.op, []byte(c.in))
		if err != nil || len(got) != len(c.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", c.in, got, err, c.want)
			continue
		}
		for i := range got {
			if string(got[i]) != c.want[i] {
				t.Errorf("Split(%q)[%d] = %q, want %q", c.in, i, got[i], c.want[i])
			}
		}
	}
	var m FramingMode
	if err := m.UnmarshalText([]byte("lines")); err == nil {
		t.Error("framing lines accepted")
	}
}

// FuzzNDJSONFramer: the records, in order, are the message's non-blank
// lines; a message without one passes whole; nothing else comes out.
func FuzzNDJSONFramer(f *testing.F) {
	for _, s := range []string{"a\nb", "\n", "", "a\r\n\r\nb\r", " x \n\ty"} {
		f.Add(s)
	}
	fr := &ndjsonFramer{}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := fr.Split(ws.OpText, []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		for _, l := range bytes.Split([]byte(in), []byte{'\n'}) {
			l = bytes.TrimSuffix(l, []byte{'\r'})
			if len(bytes.TrimSpace(l)) > 0 {
				want = append(want, l)
			}
		}
		if len(want) == 0 {
			want = [][]byte{[]byte(in)}
		}
		if len(got) != len(want) {
			t.Fatalf("Split(%q) = %q, want %q", in, got, want)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("Split(%q)[%d] = %q, want %q", in, i, got[i], want[i])
			}
		}
	})
}

// position is a Current with fixed last numbers.
type position map[string]int64

func (p position) LastSeq(s string) (int64, bool) { n, ok := p[s]; return n, ok }
func (p position) Session() string                { return "" }
func (p position) Epoch(s string) string          { return "e-" + s }

// TETHER_SUBSCRIBE_REPLAY rewrites a keyed subscribe whose stream has a
// last number; the others go as the app sent them.
func TestRulesSubscribeReplay(t *testing.T) {
	var tmpl template.SubscribeReplay
	if err := tmpl.UnmarshalText([]byte(`{"id":{{get .Message "id"}},"subscribe":{"channel":{{json .Stream}},"recover":true,"offset":{{.LastSeq}},"epoch":{{json .Epoch}}}}`)); err != nil {
		t.Fatal(err)
	}
	rp := NewRules(Rules{SubscribeMatch: compile(t, `{"subscribe":{}}`), SubscriptionKey: path(t, "subscribe.channel"), SubscribeReplay: tmpl}).Capabilities().Replay
	if rp == nil {
		t.Fatal("no replayer")
	}
	cur := position{"news": 12}
	msg := []byte(`{"id":3,"subscribe":{"channel":"news"}}`)
	cases := []struct {
		e    Entry
		want string
	}{
		{Entry{Message: msg, Key: "news", Keyed: true, Op: AppSubscribe}, `{"id":3,"subscribe":{"channel":"news","recover":true,"offset":12,"epoch":"e-news"}}`},
		{Entry{Message: []byte(`{"id":4,"subscribe":{"channel":"new"}}`), Key: "new", Keyed: true, Op: AppSubscribe}, `{"id":4,"subscribe":{"channel":"new"}}`},
		{Entry{Message: msg, Op: AppSubscribe}, string(msg)},
		{Entry{Message: []byte(`{"unsubscribe":{}}`), Op: AppUnsubscribe}, `{"unsubscribe":{}}`},
	}
	for _, c := range cases {
		got, err := rp.Replay(c.e, cur)
		if err != nil || string(got) != c.want {
			t.Errorf("Replay(%s) = %s, %v; want %s", c.e.Message, got, err, c.want)
		}
	}
}
