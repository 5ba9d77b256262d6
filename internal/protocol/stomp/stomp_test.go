package stomp

import (
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/protocol"
)

func TestApp(t *testing.T) {
	p := New()
	cases := []struct {
		msg  string
		want protocol.App
	}{
		{"CONNECT\naccept-version:1.2\nheart-beat:2000,2000\n\n\x00", protocol.App{Kind: protocol.AppLogin}},
		{"STOMP\naccept-version:1.2\n\n\x00", protocol.App{Kind: protocol.AppLogin}},
		{"\n", protocol.App{Kind: protocol.AppKeepalive}},
		{"\r\n\n", protocol.App{Kind: protocol.AppKeepalive}},
		{"SUBSCRIBE\nid:sub-0\ndestination:/topic/a\n\n\x00", protocol.App{Kind: protocol.AppSubscribe, Key: "sub-0", Keyed: true}},
		{"SUBSCRIBE\r\ndestination:/topic/a\r\nid:s\\c1\r\nreceipt:r-1\r\n\r\n\x00\n",
			protocol.App{Kind: protocol.AppSubscribe, Key: "s:1", Keyed: true, ReplyID: "r-1"}},
		{"SUBSCRIBE\nid:a\nid:b\n\n\x00", protocol.App{Kind: protocol.AppSubscribe, Key: "a", Keyed: true}}, // the first counts
		{"SUBSCRIBE\ndestination:/topic/a\n\n\x00", protocol.App{}},                                         // no id: the broker refuses it
		{"UNSUBSCRIBE\nid:sub-0\n\n\x00", protocol.App{Kind: protocol.AppUnsubscribe, Key: "sub-0", Keyed: true}},
		{"SEND\ndestination:/queue/a\nreceipt:7\ncontent-length:2\n\nhi\x00", protocol.App{AckID: "7"}},
		{"SEND\ndestination:/queue/a\n\nhi\x00", protocol.App{}},
		{"ACK\nid:T_sub-0@@session-x@@1\n\n\x00", protocol.App{DeliveryID: "T_sub-0@@session-x@@1"}},
		{"NACK\nmessage-id:m1\nsubscription:0\n\n\x00", protocol.App{DeliveryID: "m1"}}, // STOMP 1.1
		{"DISCONNECT\nreceipt:77\n\n\x00", protocol.App{}},
		{"SEND\ndestination:/queue/a", protocol.App{}}, // no blank line: not a frame
		{"", protocol.App{}},
	}
	for _, c := range cases {
		if got := p.App([]byte(c.msg)); got != c.want {
			t.Errorf("App(%q) = %+v, want %+v", c.msg, got, c.want)
		}
	}
}

func TestUpstream(t *testing.T) {
	p := New()
	cases := []struct {
		msg  string
		want protocol.Upstream
	}{
		{"CONNECTED\nversion:1.2\nheart-beat:2000,2000\n\n\x00", protocol.Upstream{LoginOK: true}},
		{"RECEIPT\nreceipt-id:r-1\n\n\x00", protocol.Upstream{ReplyID: "r-1", Ack: true, AckID: "r-1"}},
		{"RECEIPT\n\n\x00", protocol.Upstream{}},
		{"MESSAGE\nsubscription:0\nmessage-id:m-1\nack:a\\\\1\ndestination:/queue/a\n\nbody\x00", protocol.Upstream{DeliveryID: `a\1`}},
		{"MESSAGE\nsubscription:0\nmessage-id:m-1\n\nbody\x00", protocol.Upstream{DeliveryID: "m-1"}},
		{"ERROR\nmessage:bad\n\n\x00", protocol.Upstream{}},
		{"\n", protocol.Upstream{}},
	}
	for _, c := range cases {
		if got := p.Upstream([]byte(c.msg)); got != c.want {
			t.Errorf("Upstream(%q) = %+v, want %+v", c.msg, got, c.want)
		}
	}
	confirm := p.Capabilities().Confirm
	if !confirm([]byte("CONNECTED\nversion:1.2\n\n\x00\n")) || !confirm([]byte("\nCONNECTED\r\n\r\n\x00")) || confirm([]byte("MESSAGE\n\n\x00")) {
		t.Error("Confirm does not read CONNECTED alone")
	}
}

// The beat toward the app: the interval the broker beats at, max(sx, cy),
// and none when either side declines.
func TestNegotiate(t *testing.T) {
	cases := []struct {
		connect, connected string
		want               time.Duration
	}{
		{"heart-beat:2000,2000", "heart-beat:4000,4000", 4 * time.Second},
		{"heart-beat:0,1000", "heart-beat:500,0", time.Second},
		{"heart-beat:1000,0", "heart-beat:1000,1000", 0}, // the app wants none
		{"heart-beat:1000,1000", "heart-beat:0,1000", 0}, // the broker sends none
		{"", "heart-beat:1000,1000", 0},                  // no header: 0,0
		{"heart-beat:x,1", "heart-beat:1,1", 0},
	}
	for _, c := range cases {
		got := negotiate([]byte("CONNECT\n"+c.connect+"\n\n\x00"), []byte("CONNECTED\n"+c.connected+"\n\n\x00"))
		if got != c.want {
			t.Errorf("negotiate(%q, %q) = %v, want %v", c.connect, c.connected, got, c.want)
		}
	}
	if m := New().Capabilities().Keepalive.Answer([]byte("\n")); string(m.Data) != "\n" {
		t.Errorf("a heart-beat answered with %q", m.Data)
	}
}

// FuzzClassify: classification never panics and is consistent: a keyed
// kind has a key, a login is CONNECT or STOMP, and a LoginOK is what
// Confirm sees.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"CONNECT\nheart-beat:1,1\n\n\x00", "SUBSCRIBE\nid:1\nreceipt:r\n\n\x00", "ACK\nid:x\n\n\x00",
		"CONNECTED\n\n\x00", "RECEIPT\nreceipt-id:r\n\n\x00", "MESSAGE\nack:\\c\n\n\x00", "\r\n"} {
		f.Add([]byte(s))
	}
	p := New()
	f.Fuzz(func(t *testing.T, data []byte) {
		a := p.App(data)
		if a.Keyed != (a.Kind == protocol.AppSubscribe || a.Kind == protocol.AppUnsubscribe) {
			t.Fatalf("App(%q) = %+v: keyed and kind disagree", data, a)
		}
		if a.Kind == protocol.AppKeepalive && !isHeartbeat(data) {
			t.Fatalf("App(%q) = %+v: a keepalive that is not EOLs", data, a)
		}
		u := p.Upstream(data)
		if u.LoginOK && !p.Capabilities().Confirm(data) {
			t.Fatalf("Upstream(%q).LoginOK but Confirm says otherwise", data)
		}
		if u.Ack != (u.AckID != "") || u.Ack && u.ReplyID != u.AckID {
			t.Fatalf("Upstream(%q) = %+v", data, u)
		}
		heartbeats(data)
	})
}
