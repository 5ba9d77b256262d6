package centrifuge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

func TestApp(t *testing.T) {
	p := New(Options{})
	cases := []struct {
		msg  string
		want protocol.App
	}{
		{`{"id":1,"connect":{"token":"t","name":"js"}}`, protocol.App{Kind: protocol.AppLogin, ReplyID: "1"}},
		{`{"id":2,"subscribe":{"channel":"news"}}`, protocol.App{Kind: protocol.AppSubscribe, Key: "news", Keyed: true, ReplyID: "2"}},
		{`{"id":3,"unsubscribe":{"channel":"news"}}`, protocol.App{Kind: protocol.AppUnsubscribe, Key: "news", Keyed: true, ReplyID: "3"}},
		{`{}`, protocol.App{Kind: protocol.AppKeepalive}},
		{` { } `, protocol.App{Kind: protocol.AppKeepalive}},
		{`{"id":4,"publish":{"channel":"news","data":{}}}`, protocol.App{}},
		{`{"send":{"data":{}}}`, protocol.App{}},
		{`{"id":5,"subscribe":{"channel":7}}`, protocol.App{}},
		{`{}}`, protocol.App{}},
		{`}{`, protocol.App{}},
		{`[]`, protocol.App{}},
		{`not json`, protocol.App{}},
	}
	for _, c := range cases {
		if got := p.App([]byte(c.msg)); got != c.want {
			t.Errorf("App(%s) = %+v, want %+v", c.msg, got, c.want)
		}
	}
}

func TestUpstream(t *testing.T) {
	p := New(Options{})
	cases := []struct {
		msg  string
		want protocol.Upstream
	}{
		{`{"id":1,"connect":{"client":"c","version":"0.40.1","ping":25,"pong":true}}`, protocol.Upstream{LoginOK: true, ReplyID: "1"}},
		{`{"id":1,"error":{"code":109,"message":"token expired"}}`, protocol.Upstream{ReplyID: "1"}},
		{`{"id":2,"subscribe":{"recoverable":true,"epoch":"e","offset":4}}`, protocol.Upstream{ReplyID: "2"}},
		{`{"push":{"channel":"news","pub":{"data":{"n":5},"offset":5}}}`,
			protocol.Upstream{Seq: protocol.Fields{Seq: 5, HasSeq: true, Stream: "news"}}},
		{`{"push":{"channel":"news","pub":{"data":{"n":5}}}}`, protocol.Upstream{}}, // a channel without history
		{`{"push":{"channel":"news","unsubscribe":{"code":2000,"reason":"server unsubscribe"}}}`, protocol.Upstream{Ends: true, EndKey: "news"}},
		{`{"push":{"channel":"news","join":{"info":{}}}}`, protocol.Upstream{}},
		{`{}`, protocol.Upstream{Ping: true}}, // the server's ping
		{` { }`, protocol.Upstream{Ping: true}},
		{`{}{}`, protocol.Upstream{}},
		{`{"id":3}`, protocol.Upstream{ReplyID: "3"}},
	}
	for _, c := range cases {
		if got := p.Upstream([]byte(c.msg)); got != c.want {
			t.Errorf("Upstream(%s) = %+v, want %+v", c.msg, got, c.want)
		}
	}
	caps := p.Capabilities()
	if !caps.Confirm([]byte(`{"id":1,"connect":{}}`)) || caps.Confirm([]byte(`{"id":1,"error":{"code":1}}`)) || caps.Confirm([]byte(`{}`)) {
		t.Error("Confirm does not read a connect reply alone")
	}
}

func TestFramer(t *testing.T) {
	fr := newFramer()
	got, err := fr.Split(ws.OpText, []byte("{\"id\":1,\"connect\":{}}\n{\"id\":2,\"subscribe\":{\"channel\":\"a\"}}\n\n{}\r\n"))
	if err != nil || len(got) != 3 || string(got[0]) != `{"id":1,"connect":{}}` || string(got[2]) != `{}` {
		t.Fatalf("Split = %q, %v", got, err)
	}
	if _, err := fr.Split(ws.OpBinary, []byte{1, 2}); err != ErrBinary {
		t.Errorf("binary: %v, want ErrBinary", err)
	}
}

type position map[string]int64

func (p position) LastSeq(s string) (int64, bool) { n, ok := p[s]; return n, ok }
func (p position) Session() string                { return "" }
func (p position) Epoch(string) string            { return "" }

// A replayed subscribe recovers from the last offset the app got and the
// epoch of the last reply; without an epoch it goes as the app sent it.
func TestReplay(t *testing.T) {
	sub := []byte(`{"id":2,"subscribe":{"channel":"news","data":{"x":1}}}`)
	e := protocol.Entry{Message: sub, Key: "news", Keyed: true, Op: protocol.AppSubscribe}
	if got, err := (replayer{}).Replay(e, position{"news": 9}); err != nil || string(got) != string(sub) {
		t.Errorf("without an epoch: %s, %v", got, err)
	}
	a := reply([]byte(`{"id":2,"subscribe":{"recoverable":true,"epoch":"ep","offset":4}}`), e, false)
	if a.Log == nil || a.Seq != (protocol.Fields{Stream: "news", Resync: true, ResyncSeq: 4}) || a.Messages != nil {
		t.Fatalf("app's reply: %+v", a)
	}
	e.Message = a.Log
	for _, c := range []struct {
		pos  position
		want int
	}{{position{}, 4}, {position{"news": 9}, 9}, {position{"news": 2}, 4}} {
		got, err := (replayer{}).Replay(e, c.pos)
		if err != nil {
			t.Fatal(err)
		}
		var cmd struct {
			ID  int `json:"id"`
			Sub struct {
				Channel string          `json:"channel"`
				Recover bool            `json:"recover"`
				Epoch   string          `json:"epoch"`
				Offset  int             `json:"offset"`
				Data    json.RawMessage `json:"data"`
			} `json:"subscribe"`
		}
		if err := json.Unmarshal(got, &cmd); err != nil {
			t.Fatal(err)
		}
		if cmd.ID != 2 || cmd.Sub.Channel != "news" || !cmd.Sub.Recover || cmd.Sub.Epoch != "ep" || cmd.Sub.Offset != c.want || string(cmd.Sub.Data) != `{"x":1}` {
			t.Errorf("replay at %v = %s, want offset %d", c.pos, got, c.want)
		}
	}
}

// A recovering reply to tether's replay delivers its publications as
// pushes; one that could not recover resets the stream, unsubscribes
// upstream and tells the app with code 2500; an error for a replay too.
// Publications come only from an array in a reply that is valid JSON.
func TestReply(t *testing.T) {
	e := protocol.Entry{Message: []byte(`{"id":2,"subscribe":{"channel":"a\"b"}}`), Key: `a"b`, Keyed: true, Op: protocol.AppSubscribe}
	a := reply([]byte(`{"id":2,"subscribe":{"recoverable":true,"epoch":"ep","offset":7,"recovered":true,"was_recovering":true,`+
		`"publications":[{"data":{"n":6},"offset":6},{"data":{"n":7},"offset":7}]}}`), e, true)
	if a.Seq != (protocol.Fields{}) || len(a.Messages) != 2 || a.Upstream != nil {
		t.Fatalf("recovered: %+v", a)
	}
	p := New(Options{})
	for i, m := range a.Messages {
		if u := p.Upstream(m); u.Seq != (protocol.Fields{Seq: int64(6 + i), HasSeq: true, Stream: `a"b`}) {
			t.Errorf("recovered publication %s reads %+v", m, u)
		}
	}
	a = reply([]byte(`{"id":2,"subscribe":{"recoverable":true,"epoch":"new","offset":0,"was_recovering":true}}`), e, true)
	if a.Seq != (protocol.Fields{Stream: `a"b`, Resync: true, ResyncSeq: 0}) || len(a.Messages) != 1 || len(a.Upstream) != 1 {
		t.Fatalf("not recovered: %+v", a)
	}
	if u := p.Upstream(a.Messages[0]); !u.Ends || u.EndKey != `a"b` || !strings.Contains(string(a.Messages[0]), `"code":2500`) {
		t.Errorf("the app's notice %s reads %+v", a.Messages[0], u)
	}
	if got := p.App(a.Upstream[0]); got.Kind != protocol.AppUnsubscribe || got.Key != `a"b` || got.ReplyID != "4294967295" {
		t.Errorf("tether's unsubscribe %s reads %+v", a.Upstream[0], got)
	}
	if a = reply([]byte(`{"id":2,"subscribe":{"recoverable":true,"epoch":"ep","offset":9}}`), e, true); len(a.Messages) != 1 || len(a.Upstream) != 1 {
		t.Errorf("replay that did not recover: %+v", a)
	}
	if a = reply([]byte(`{"id":2,"subscribe":{}}`), e, true); a.Messages != nil || a.Log != nil || a.Seq != (protocol.Fields{}) {
		t.Errorf("a channel without recovery: %+v", a)
	}
	if a = reply([]byte(`{"id":2,"error":{"code":112,"message":"unrecoverable position"}}`), e, true); len(a.Messages) != 1 || a.Upstream != nil {
		t.Errorf("error for a replay: %+v", a)
	}
	if a = reply([]byte(`{"id":2,"error":{"code":103,"message":"permission denied"}}`), e, false); len(a.Messages) != 0 {
		t.Errorf("error for the app's subscribe: %+v", a)
	}
	for _, r := range []string{`{"id":2,"subscribe":{"recovered":true,"publications":5}}`,
		`{"id":2,"subscribe":{"recovered":true,"publications":[{"offset":1}]}`} {
		if a = reply([]byte(r), e, true); a.Messages != nil {
			t.Errorf("publications from %s: %q", r, a.Messages)
		}
	}
}

// FuzzClassify: framing and classification never panic and agree: every
// framed piece is non-empty and has no newline, a keyed kind has a
// channel, a login answers by id, and only a connect reply confirms.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{`{"id":1,"connect":{}}` + "\n" + `{"id":2,"subscribe":{"channel":"a"}}`, `{}`,
		`{"push":{"channel":"a","pub":{"offset":3}}}`, `{"push":{"channel":"a","unsubscribe":{"code":2500}}}`,
		`{"id":2,"subscribe":{"epoch":"e","offset":3,"recovered":true,"publications":[{"offset":3}]}}`} {
		f.Add([]byte(s))
	}
	p := New(Options{})
	e := protocol.Entry{Message: []byte(`{"id":2,"subscribe":{"channel":"a"}}`), Key: "a", Keyed: true, Op: protocol.AppSubscribe}
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, _ := newFramer().Split(ws.OpText, data)
		for _, m := range msgs {
			if len(m) == 0 || strings.ContainsRune(string(m), '\n') {
				t.Fatalf("Split(%q) gave %q", data, m)
			}
			a := p.App(m)
			if a.Keyed != (a.Kind == protocol.AppSubscribe || a.Kind == protocol.AppUnsubscribe) {
				t.Fatalf("App(%q) = %+v", m, a)
			}
			u := p.Upstream(m)
			if u.LoginOK && u.ReplyID == "" || u.LoginOK != p.Capabilities().Confirm(m) || u.Ends && u.Seq.HasSeq {
				t.Fatalf("Upstream(%q) = %+v", m, u)
			}
			for _, own := range []bool{false, true} {
				ans := reply(m, e, own)
				for _, pm := range ans.Messages {
					if !json.Valid(pm) {
						t.Fatalf("reply(%q) gives the app %q", m, pm)
					}
				}
				if ans.Log != nil && !json.Valid(ans.Log) {
					t.Fatalf("reply(%q) logs %q", m, ans.Log)
				}
			}
		}
	})
}
