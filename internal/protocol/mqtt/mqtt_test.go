package mqtt

import (
	"bytes"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

// Packets of both versions: 3.1.1 (level 4) and 5 (level 5, with property
// lists: a subscription identifier 0x0b, a user property 0x26).
var (
	connect311 = pkt(Connect, 0, str("MQTT"), []byte{4, 2}, u16(2), str("app"))
	connect5   = pkt(Connect, 0, str("MQTT"), []byte{5, 2}, u16(2), []byte{0}, str("app"))
	props5     = []byte{2, 0x0b, 0x07}
	userProp   = append([]byte{8, 0x26}, append(str("k"), str("vv")...)...)
)

func TestApp(t *testing.T) {
	p := New(Options{})
	cases := []struct {
		name string
		data []byte
		want protocol.App
	}{
		{"CONNECT 3.1.1", connect311, protocol.App{Kind: protocol.AppLogin}},
		{"CONNECT 5", connect5, protocol.App{Kind: protocol.AppLogin}},
		{"PINGREQ", pkt(Pingreq, 0), protocol.App{Kind: protocol.AppKeepalive}},
		{"PUBLISH QoS 0", pkt(Publish, 0, str("a"), []byte("x")), protocol.App{}},
		{"PUBLISH QoS 1", pkt(Publish, 2, str("a"), u16(5), []byte("x")), protocol.App{AckID: "p5"}},
		{"PUBLISH QoS 2 v5", pkt(Publish, 4, str("a"), u16(6), []byte{0}, []byte("x")), protocol.App{AckID: "p6"}},
		{"PUBREL", pkt(Pubrel, 2, u16(6)), protocol.App{AckID: "r6"}},
		{"PUBACK of the broker's PUBLISH", pkt(Puback, 0, u16(5)), protocol.App{}},
		{"SUBSCRIBE 3.1.1", pkt(Subscribe, 2, u16(1), str("a/+"), []byte{1}),
			protocol.App{Kind: protocol.AppSubscribe, Key: "a/+", Keyed: true, ReplyID: "s1"}},
		{"SUBSCRIBE 5", pkt(Subscribe, 2, u16(2), []byte{0}, str("a/#"), []byte{0x2d}),
			protocol.App{Kind: protocol.AppSubscribe, Key: "a/#", Keyed: true, ReplyID: "s2"}},
		{"SUBSCRIBE 5 with an identifier", pkt(Subscribe, 2, u16(3), props5, str("b"), []byte{2}),
			protocol.App{Kind: protocol.AppSubscribe, Key: "b", Keyed: true, ReplyID: "s3"}},
		{"SUBSCRIBE 5 with a user property", pkt(Subscribe, 2, u16(3), userProp, str("b"), []byte{2}),
			protocol.App{Kind: protocol.AppSubscribe, Key: "b", Keyed: true, ReplyID: "s3"}},
		{"SUBSCRIBE of two filters", pkt(Subscribe, 2, u16(4), str("a"), []byte{0}, str("b"), []byte{1}),
			protocol.App{Kind: protocol.AppSubscribe, ReplyID: "s4"}},
		{"SUBSCRIBE 5 of two filters", pkt(Subscribe, 2, u16(4), []byte{0}, str("a"), []byte{0}, str("b"), []byte{1}),
			protocol.App{Kind: protocol.AppSubscribe, ReplyID: "s4"}},
		{"SUBSCRIBE without a filter", pkt(Subscribe, 2, u16(4)), protocol.App{Kind: protocol.AppSubscribe, ReplyID: "s4"}},
		{"SUBSCRIBE with bad options", pkt(Subscribe, 2, u16(4), str("a"), []byte{3}), protocol.App{Kind: protocol.AppSubscribe, ReplyID: "s4"}},
		{"UNSUBSCRIBE 3.1.1", pkt(Unsubscribe, 2, u16(9), str("a/+")),
			protocol.App{Kind: protocol.AppUnsubscribe, Key: "a/+", Keyed: true, ReplyID: "u9"}},
		{"UNSUBSCRIBE 5", pkt(Unsubscribe, 2, u16(10), []byte{0}, str("a/#")),
			protocol.App{Kind: protocol.AppUnsubscribe, Key: "a/#", Keyed: true, ReplyID: "u10"}},
		{"UNSUBSCRIBE of two", pkt(Unsubscribe, 2, u16(11), str("a"), str("b")),
			protocol.App{Kind: protocol.AppUnsubscribe, ReplyID: "u11"}},
		{"DISCONNECT", pkt(Disconnect, 0), protocol.App{}},
		{"two packets", append(pkt(Pingreq, 0), pkt(Pingreq, 0)...), protocol.App{}},
		{"cut", connect5[:5], protocol.App{}},
	}
	for _, c := range cases {
		if got := p.App(c.data); got != c.want {
			t.Errorf("%s: App(% x) = %+v, want %+v", c.name, c.data, got, c.want)
		}
	}
}

func TestUpstream(t *testing.T) {
	p := New(Options{})
	cases := []struct {
		name string
		data []byte
		want protocol.Upstream
	}{
		{"CONNACK 3.1.1", pkt(Connack, 0, []byte{0, 0}), protocol.Upstream{LoginOK: true}},
		{"CONNACK 5, session present", pkt(Connack, 0, []byte{1, 0, 3, 0x21, 0, 20}), protocol.Upstream{LoginOK: true}},
		{"CONNACK refused 3.1.1", pkt(Connack, 0, []byte{0, 5}), protocol.Upstream{LoginOK: true}},
		{"CONNACK refused 5", pkt(Connack, 0, []byte{0, 0x87, 0}), protocol.Upstream{LoginOK: true}},
		{"CONNACK cut", pkt(Connack, 0, []byte{0}), protocol.Upstream{}},
		{"PUBACK", pkt(Puback, 0, u16(5)), protocol.Upstream{Ack: true, AckID: "p5"}},
		{"PUBACK 5 with a reason", pkt(Puback, 0, u16(5), []byte{0x10}), protocol.Upstream{Ack: true, AckID: "p5"}},
		{"PUBREC", pkt(Pubrec, 0, u16(6)), protocol.Upstream{Ack: true, AckID: "p6"}},
		{"PUBCOMP", pkt(Pubcomp, 0, u16(6)), protocol.Upstream{Ack: true, AckID: "r6"}},
		{"SUBACK", pkt(Suback, 0, u16(1), []byte{1}), protocol.Upstream{ReplyID: "s1"}},
		{"UNSUBACK", pkt(Unsuback, 0, u16(9)), protocol.Upstream{ReplyID: "u9"}},
		{"PINGRESP", pkt(Pingresp, 0), protocol.Upstream{KeepaliveReply: true}},
		{"PUBLISH", pkt(Publish, 2, str("a"), u16(5), []byte("x")), protocol.Upstream{}},
		{"PUBREL of the broker's", pkt(Pubrel, 2, u16(6)), protocol.Upstream{}},
		{"DISCONNECT", pkt(Disconnect, 0, []byte{0x8b}), protocol.Upstream{}},
		{"cut PUBACK", pkt(Puback, 0, []byte{1}), protocol.Upstream{}},
	}
	for _, c := range cases {
		if got := p.Upstream(c.data); got != c.want {
			t.Errorf("%s: Upstream(% x) = %+v, want %+v", c.name, c.data, got, c.want)
		}
	}
}

// Confirm reads the first packet of a WebSocket message: a successful
// CONNACK, even with more packets after it.
func TestConfirm(t *testing.T) {
	confirm := New(Options{}).Capabilities().Confirm
	ok := pkt(Connack, 0, []byte{0, 0, 0})
	for _, c := range []struct {
		data []byte
		want bool
	}{
		{ok, true},
		{append(bytes.Clone(ok), pkt(Publish, 0, str("a"))...), true},
		{pkt(Connack, 0, []byte{0, 0x86, 0}), false},
		{ok[:3], false},
		{pkt(Suback, 0, u16(1), []byte{0}), false},
		{nil, false},
	} {
		if got := confirm(c.data); got != c.want {
			t.Errorf("Confirm(% x) = %v, want %v", c.data, got, c.want)
		}
	}
}

// Tether's PINGRESP is a binary PINGRESP; a re-sent PUBLISH gets DUP, on a
// copy, and a PUBREL goes again as it was.
func TestKeepaliveAndResend(t *testing.T) {
	caps := New(Options{}).Capabilities()
	if m := caps.Keepalive.Answer(pkt(Pingreq, 0)); m.Op != ws.OpBinary || !bytes.Equal(m.Data, pkt(Pingresp, 0)) {
		t.Errorf("PINGREQ answered with %v % x", m.Op, m.Data)
	}
	pub := pkt(Publish, 2|1, str("a"), u16(5), []byte("x"))
	orig := bytes.Clone(pub)
	again := caps.Resend(pub)
	if !bytes.Equal(pub, orig) {
		t.Error("Resend modified the app's PUBLISH")
	}
	if want := append([]byte{pub[0] | dupFlag}, pub[1:]...); !bytes.Equal(again, want) {
		t.Errorf("re-sent PUBLISH % x, want % x", again, want)
	}
	if rel := pkt(Pubrel, 2, u16(5)); !bytes.Equal(caps.Resend(rel), rel) {
		t.Error("Resend changed a PUBREL")
	}
}

// FuzzClassify: classification never panics on any packet, and what it
// says is consistent: a keyed kind has a non-empty key, a reply id only on
// a subscription, an ack id only on a PUBLISH of QoS 1 or 2 or a PUBREL, a
// packet that confirms answers the login.
func FuzzClassify(f *testing.F) {
	for _, d := range [][]byte{connect5, pkt(Subscribe, 2, u16(3), props5, str("b"), []byte{2}), pkt(Unsubscribe, 2, u16(9), str("a/+")),
		pkt(Publish, 2, str("a"), u16(5), []byte("x")), pkt(Connack, 0, []byte{0, 0}), pkt(Suback, 0, u16(1), []byte{1})} {
		f.Add(d)
	}
	p := New(Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		a := p.App(data)
		if a.Keyed && (a.Key == "" || a.Kind != protocol.AppSubscribe && a.Kind != protocol.AppUnsubscribe) {
			t.Fatalf("App(% x) = %+v", data, a)
		}
		if (a.ReplyID != "") != (a.Kind == protocol.AppSubscribe || a.Kind == protocol.AppUnsubscribe) {
			t.Fatalf("App(% x) = %+v: reply id and kind disagree", data, a)
		}
		if a.AckID != "" && Type(data[0]>>4) != Publish && Type(data[0]>>4) != Pubrel {
			t.Fatalf("App(% x) = %+v: an ack id on a %s", data, a, Type(data[0]>>4))
		}
		u := p.Upstream(data)
		if _, one := parse(data); one && p.Capabilities().Confirm(data) && !u.LoginOK {
			t.Fatalf("Upstream(% x) confirms but does not answer the login", data)
		}
		if again := resend(data); len(again) != len(data) {
			t.Fatalf("resend changed the length of % x", data)
		}
	})
}
