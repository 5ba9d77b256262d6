package graphqllegacy

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/protocol/graphqlws"
)

func TestApp(t *testing.T) {
	p := New(Options{})
	cases := []struct {
		msg  string
		want protocol.App
	}{
		{`{"type":"connection_init","payload":{"token":"t"}}`, protocol.App{Kind: protocol.AppLogin}},
		{`{"id":"1","type":"start","payload":{"query":"subscription { countdown(from: 3) }"}}`,
			protocol.App{Kind: protocol.AppSubscribe, Key: "1", Keyed: true}},
		{`{"id":"2","type":"start","payload":{"query":"{ hello }"}}`,
			protocol.App{Kind: protocol.AppSubscribe, Key: "2", Keyed: true, AtMostOnce: true}},
		{`{"id":"3","type":"start","payload":{"query":"mutation M { bump }","operationName":"M"}}`,
			protocol.App{Kind: protocol.AppSubscribe, Key: "3", Keyed: true, AtMostOnce: true}},
		{`{"id":"1","type":"stop"}`, protocol.App{Kind: protocol.AppUnsubscribe, Key: "1", Keyed: true, IfActive: true}},
		{`{"type":"connection_terminate"}`, protocol.App{}},
		{`{"id":1,"type":"start"}`, protocol.App{}}, // not a string id
		{`{"type":"stop"}`, protocol.App{}},
		{`{"type":"subscribe","id":"1"}`, protocol.App{}}, // graphql-transport-ws, not this protocol
		{`not json`, protocol.App{}},
	}
	for _, c := range cases {
		if got := p.App([]byte(c.msg)); got != c.want {
			t.Errorf("App(%s) = %+v, want %+v", c.msg, got, c.want)
		}
	}
}

func TestRerun(t *testing.T) {
	query := []byte(`{"id":"q","type":"start","payload":{"query":"{ hello }"}}`)
	mutation := []byte(`{"id":"m","type":"start","payload":{"query":"mutation { bump }"}}`)
	for _, c := range []struct {
		rerun      graphqlws.Rerun
		query, mut bool // at most once
	}{
		{graphqlws.RerunNone, true, true},
		{graphqlws.RerunQueries, false, true},
		{graphqlws.RerunAll, false, false},
	} {
		p := New(Options{Rerun: c.rerun})
		if got := [2]bool{p.App(query).AtMostOnce, p.App(mutation).AtMostOnce}; got != [2]bool{c.query, c.mut} {
			t.Errorf("rerun=%s: at most once (query, mutation) = %v", c.rerun, got)
		}
	}
}

func TestUpstream(t *testing.T) {
	p := New(Options{})
	cases := []struct {
		msg  string
		want protocol.Upstream
	}{
		{`{"type":"connection_ack"}`, protocol.Upstream{LoginOK: true}},
		{`{"type":"connection_error","payload":{"message":"no"}}`, protocol.Upstream{}},
		{`{"type":"ka"}`, protocol.Upstream{}},
		{`{"id":"7","type":"complete"}`, protocol.Upstream{Ends: true, EndKey: "7"}},
		{`{"id":"7","type":"error","payload":{"message":"no"}}`, protocol.Upstream{Ends: true, EndKey: "7"}},
		{`{"id":"7","type":"data","payload":{"data":{}}}`, protocol.Upstream{}},
		{`{"type":"complete"}`, protocol.Upstream{}},
	}
	for _, c := range cases {
		if got := p.Upstream([]byte(c.msg)); got != c.want {
			t.Errorf("Upstream(%s) = %+v, want %+v", c.msg, got, c.want)
		}
	}
	caps := p.Capabilities()
	if !caps.Confirm([]byte(`{"type":"connection_ack","payload":{}}`)) || caps.Confirm([]byte(`{"type":"ka"}`)) {
		t.Error("Confirm does not read connection_ack alone")
	}
	if k := caps.Keepalive; k.Every != KeepaliveEvery || string(k.Beat.Data) != `{"type":"ka"}` || k.Answer != nil {
		t.Errorf("keepalive %+v, want a ka every %v and no answer", k, KeepaliveEvery)
	}
}

// The abandoned operation's error is the protocol's: its id, type error, a
// payload with a message (what the client library's formatErrors reads);
// an id with quotes stays one JSON string.
func TestAbandoned(t *testing.T) {
	for _, id := range []string{"1", `a"b\c`, "<é>"} {
		m := abandoned(protocol.Entry{Key: id, Keyed: true})
		var got struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Payload struct {
				Message string `json:"message"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(m.Data, &got); err != nil {
			t.Fatalf("%s: %v", m.Data, err)
		}
		if got.ID != id || got.Type != "error" || got.Payload.Message != LostMessage {
			t.Errorf("abandoned(%q) = %s", id, m.Data)
		}
	}
}

// FuzzClassify: classification never panics, and what it says is
// consistent: a keyed kind has a key that is the message's string id, only
// a start is at most once, only a stop is sent if active, and only the
// ack answers the login and confirms.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{`{"type":"connection_init"}`, `{"id":"1","type":"start","payload":{"query":"{ a }"}}`,
		`{"id":"1","type":"stop"}`, `{"type":"connection_ack"}`, `{"id":"x","type":"error","payload":{}}`, `{"type":"ka"}`,
		`{"id":"1","type":"complete"}`, `{"id":"2","type":"data","payload":{"data":null}}`} {
		f.Add([]byte(s))
	}
	p := New(Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		a := p.App(data)
		if a.Keyed != (a.Kind == protocol.AppSubscribe || a.Kind == protocol.AppUnsubscribe) {
			t.Fatalf("App(%q) = %+v: keyed and kind disagree", data, a)
		}
		if id, ok := stringID(data); a.Keyed && ok && id != a.Key {
			t.Fatalf("App(%q) = %+v: key is not the id %q", data, a, id)
		}
		if a.AtMostOnce && a.Kind != protocol.AppSubscribe || a.IfActive && a.Kind != protocol.AppUnsubscribe ||
			a.Kind == protocol.AppKeepalive || a.AckID != "" || a.ReplyID != "" {
			t.Fatalf("App(%q) = %+v", data, a)
		}
		u := p.Upstream(data)
		if id, ok := stringID(data); u.Ends && ok && id != u.EndKey {
			t.Fatalf("Upstream(%q) = %+v: ends another key than the id %q", data, u, id)
		}
		if u.LoginOK != p.Capabilities().Confirm(data) {
			t.Fatalf("Upstream(%q).LoginOK=%v but Confirm says otherwise", data, u.LoginOK)
		}
	})
}

// stringID is the string id of a valid JSON object, ok false otherwise,
// and for an object naming "id" twice, which JSON parsers read differently
// (the first or the last): not a message a client library sends.
func stringID(data []byte) (string, bool) {
	var m map[string]json.RawMessage
	if !json.Valid(data) || json.Unmarshal(data, &m) != nil || bytes.Count(data, []byte(`"id"`)) > 1 {
		return "", false
	}
	var id string
	if json.Unmarshal(m["id"], &id) != nil {
		return "", false
	}
	return id, true
}
