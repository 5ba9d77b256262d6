package graphqlws

import (
	"encoding/json"
	"testing"

	"github.com/tetherproxy/tether/internal/protocol"
)

func TestApp(t *testing.T) {
	p := New(Options{})
	cases := []struct {
		msg  string
		want protocol.App
	}{
		{`{"type":"connection_init","payload":{"token":"t"}}`, protocol.App{Kind: protocol.AppLogin}},
		{`{"type":"ping"}`, protocol.App{Kind: protocol.AppKeepalive}},
		{`{"type":"pong"}`, protocol.App{}},
		{`{"id":"1","type":"subscribe","payload":{"query":"subscription { countdown(from: 3) }"}}`,
			protocol.App{Kind: protocol.AppSubscribe, Key: "1", Keyed: true}},
		{`{"id":"2","type":"subscribe","payload":{"query":"{ hello }"}}`,
			protocol.App{Kind: protocol.AppSubscribe, Key: "2", Keyed: true, AtMostOnce: true}},
		{`{"id":"3","type":"subscribe","payload":{"query":"query A { a } subscription B { b }","operationName":"B"}}`,
			protocol.App{Kind: protocol.AppSubscribe, Key: "3", Keyed: true}},
		{`{"id":"4","type":"subscribe","payload":{"query":"query A { a } subscription B { b }"}}`,
			protocol.App{Kind: protocol.AppSubscribe, Key: "4", Keyed: true, AtMostOnce: true}},
		{`{"id":"1","type":"complete"}`, protocol.App{Kind: protocol.AppUnsubscribe, Key: "1", Keyed: true, IfActive: true}},
		{`{"id":1,"type":"subscribe"}`, protocol.App{}},              // not a string id: the server refuses it with 4400
		{"{\"id\":\"\xaf\",\"type\":\"subscribe\"}", protocol.App{}}, // not UTF-8: no reply would carry these bytes
		{`{"type":"","id":"1"}`, protocol.App{}},
		{`not json`, protocol.App{}},
	}
	for _, c := range cases {
		if got := p.App([]byte(c.msg)); got != c.want {
			t.Errorf("App(%s) = %+v, want %+v", c.msg, got, c.want)
		}
	}
}

func TestRerun(t *testing.T) {
	query := []byte(`{"id":"q","type":"subscribe","payload":{"query":"{ hello }"}}`)
	mutation := []byte(`{"id":"m","type":"subscribe","payload":{"query":"mutation { bump }"}}`)
	unknown := []byte(`{"id":"u","type":"subscribe","payload":{"query":"{"}}`)
	for _, c := range []struct {
		rerun            string
		query, mut, unkn bool // at most once
	}{
		{"none", true, true, true},
		{"queries", false, true, true},
		{"all", false, false, false},
	} {
		var r Rerun
		if err := r.UnmarshalText([]byte(c.rerun)); err != nil || r.String() != c.rerun {
			t.Fatalf("Rerun %q: %v, %v", c.rerun, r, err)
		}
		p := New(Options{Rerun: r})
		if got := [3]bool{p.App(query).AtMostOnce, p.App(mutation).AtMostOnce, p.App(unknown).AtMostOnce}; got != [3]bool{c.query, c.mut, c.unkn} {
			t.Errorf("rerun=%s: at most once (query, mutation, unknown) = %v", c.rerun, got)
		}
	}
	var r Rerun
	if err := r.UnmarshalText([]byte("some")); err == nil {
		t.Error("Rerun accepted \"some\"")
	}
}

func TestUpstream(t *testing.T) {
	p := New(Options{})
	cases := []struct {
		msg  string
		want protocol.Upstream
	}{
		{`{"type":"connection_ack"}`, protocol.Upstream{LoginOK: true}},
		{`{"id":"7","type":"complete"}`, protocol.Upstream{Ends: true, EndKey: "7"}},
		{`{"id":"7","type":"error","payload":[{"message":"no"}]}`, protocol.Upstream{Ends: true, EndKey: "7"}},
		{`{"id":"7","type":"next","payload":{"data":{}}}`, protocol.Upstream{}},
		{`{"type":"ping"}`, protocol.Upstream{}},
		{`{"type":"pong"}`, protocol.Upstream{KeepaliveReply: true}},
		{`{"type":"pong","payload":{"t":1}}`, protocol.Upstream{KeepaliveReply: true}},
		{`{"type":"complete"}`, protocol.Upstream{}},
	}
	for _, c := range cases {
		if got := p.Upstream([]byte(c.msg)); got != c.want {
			t.Errorf("Upstream(%s) = %+v, want %+v", c.msg, got, c.want)
		}
	}
	caps := p.Capabilities()
	if !caps.Confirm([]byte(`{"type":"connection_ack","payload":{}}`)) || caps.Confirm([]byte(`{"type":"next"}`)) {
		t.Error("Confirm does not read connection_ack alone")
	}
	if m := caps.Keepalive.Answer([]byte(`{"type":"ping"}`)); string(m.Data) != `{"type":"pong"}` {
		t.Errorf("ping answered with %s", m.Data)
	}
}

// The abandoned operation's error is graphql-ws: its id, type error, a
// payload of GraphQL errors; an id with quotes stays one JSON string.
func TestAbandoned(t *testing.T) {
	for _, id := range []string{"1", `a"b\c`, "<é>"} {
		m := abandoned(protocol.Entry{Key: id, Keyed: true})
		var got struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Payload []struct {
				Message string `json:"message"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(m.Data, &got); err != nil {
			t.Fatalf("%s: %v", m.Data, err)
		}
		if got.ID != id || got.Type != "error" || len(got.Payload) != 1 || got.Payload[0].Message != LostMessage {
			t.Errorf("abandoned(%q) = %s", id, m.Data)
		}
	}
}

// FuzzClassify: classification never panics, and what it says is
// consistent: a keyed kind has a key that is the message's string id, and
// only a subscribe is at most once.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{`{"type":"connection_init"}`, `{"id":"1","type":"subscribe","payload":{"query":"{ a }"}}`,
		`{"id":"1","type":"complete"}`, `{"type":"connection_ack"}`, `{"id":"x","type":"error","payload":[]}`, `{"type":"ping"}`} {
		f.Add([]byte(s))
	}
	p := New(Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		a := p.App(data)
		if a.Keyed != (a.Kind == protocol.AppSubscribe || a.Kind == protocol.AppUnsubscribe) {
			t.Fatalf("App(%q) = %+v: keyed and kind disagree", data, a)
		}
		if a.AtMostOnce && a.Kind != protocol.AppSubscribe || a.IfActive && a.Kind != protocol.AppUnsubscribe {
			t.Fatalf("App(%q) = %+v", data, a)
		}
		u := p.Upstream(data)
		if u.Ends && u.EndKey == "" && !json.Valid(data) {
			t.Fatalf("Upstream(%q) = %+v", data, u)
		}
		if u.LoginOK != p.Capabilities().Confirm(data) {
			t.Fatalf("Upstream(%q).LoginOK=%v but Confirm says otherwise", data, u.LoginOK)
		}
	})
}
