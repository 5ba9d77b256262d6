package nats

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/protocol"
)

func splitAll(msgs ...string) ([]string, error) {
	f := newFramer()
	var out []string
	for _, m := range msgs {
		got, err := f.Split(ws.OpBinary, []byte(m))
		for _, g := range got {
			out = append(out, string(g))
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func TestFramer(t *testing.T) {
	const (
		sub  = "SUB ticks 1\r\n"
		pub  = "PUB ticks 5\r\nhe\r\no\r\n"
		hpub = "HPUB ticks _INBOX.1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
		msg  = "MSG ticks 1 2\r\nhi\r\n"
		info = `INFO {"server_id":"x","max_payload":1048576}` + "\r\n"
	)
	cases := []struct {
		name string
		in   []string
		want []string
		err  error
	}{
		{"one operation", []string{sub}, []string{sub}, nil},
		{"SUB and PUB in one message", []string{sub + pub}, []string{sub, pub}, nil},
		{"a payload holding CRLF", []string{pub}, []string{pub}, nil},
		{"HPUB", []string{hpub + "PING\r\n"}, []string{hpub, "PING\r\n"}, nil},
		{"server operations", []string{info + msg + "PING\r\n"}, []string{info, msg, "PING\r\n"}, nil},
		{"lower case", []string{"pub a 1\r\nx\r\n"}, []string{"pub a 1\r\nx\r\n"}, nil},
		{"cut in the line", []string{msg[:5], msg[5:]}, []string{msg}, nil},
		{"cut in the payload", []string{msg[:16], msg[16:]}, []string{msg}, nil},
		{"byte by byte", strings.Split(info+pub, ""), []string{info, pub}, nil},
		{"a bad size", []string{sub + "PUB a x\r\n"}, []string{sub}, ErrSize},
		{"a size and no subject", []string{"PUB 1\r\nx\r\n"}, nil, ErrSize},
		{"no CRLF after the payload", []string{"MSG a 1 1\r\nxy\r\n"}, nil, ErrSize},
		{"LF alone ends a line", []string{"PING\nPONG\n"}, []string{"PING\n", "PONG\n"}, nil},
	}
	for _, c := range cases {
		got, err := splitAll(c.in...)
		if !errors.Is(err, c.err) || strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: Split(%q) = %q, %v; want %q, %v", c.name, c.in, got, err, c.want, c.err)
		}
	}
	if _, err := splitAll(strings.Repeat("x", MaxControlLine+1)); !errors.Is(err, ErrLineTooLong) {
		t.Errorf("a control line over the bound: %v", err)
	}
}

func TestApp(t *testing.T) {
	p := New()
	cases := []struct {
		msg  string
		want protocol.App
	}{
		{`CONNECT {"verbose":false,"protocol":1}` + "\r\n", protocol.App{Kind: protocol.AppLogin}},
		{"PING\r\n", protocol.App{Kind: protocol.AppKeepalive}},
		{"ping\r\n", protocol.App{Kind: protocol.AppKeepalive}},
		{"SUB ticks 1\r\n", protocol.App{Kind: protocol.AppSubscribe, Key: "1", Keyed: true}},
		{"SUB ticks workers 2\r\n", protocol.App{Kind: protocol.AppSubscribe, Key: "2", Keyed: true}},
		{"SUB\tticks  3\r\n", protocol.App{Kind: protocol.AppSubscribe, Key: "3", Keyed: true}},
		{"SUB ticks\r\n", protocol.App{}},
		{"UNSUB 1\r\n", protocol.App{Kind: protocol.AppUnsubscribe, Key: "1", Keyed: true}},
		{"UNSUB 1 5\r\n", protocol.App{Kind: protocol.AppUnsubscribe}},
		{"PUB ticks 2\r\nhi\r\n", protocol.App{}},
		{"PONG\r\n", protocol.App{}},
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
		{`INFO {"server_id":"x"}` + "\r\n", protocol.Upstream{Once: true}},
		{"PONG\r\n", protocol.Upstream{KeepaliveReply: true}},
		{"PING\r\n", protocol.Upstream{}},
		{"MSG a 1 2\r\nhi\r\n", protocol.Upstream{}},
		{"-ERR 'Unknown Protocol Operation'\r\n", protocol.Upstream{}},
	}
	for _, c := range cases {
		if got := p.Upstream([]byte(c.msg)); got != c.want {
			t.Errorf("Upstream(%q) = %+v, want %+v", c.msg, got, c.want)
		}
	}
	caps := p.Capabilities()
	if !caps.Confirm([]byte(`INFO {}`+"\r\nPING\r\n")) || caps.Confirm([]byte("PING\r\n")) {
		t.Error("Confirm does not read INFO alone")
	}
	if m := caps.Keepalive.Answer([]byte("PING\r\n")); string(m.Data) != "PONG\r\n" {
		t.Errorf("PING answered with %q", m.Data)
	}
}

// FuzzFramer: arbitrary bytes cut at arbitrary points. Split never panics;
// without an error its operations are the input, in order, up to an
// incomplete one; and they are the same however the input was cut, as is
// whether it fails.
func FuzzFramer(f *testing.F) {
	f.Add([]byte("INFO {}\r\nMSG a 1 3\r\na\r\n\r\nPING\r\n"), []byte{3, 9, 200})
	f.Add([]byte("SUB a 1\r\nPUB a 2\r\nhi\r\nHPUB a 3 5\r\nh\r\nxy\r\n"), []byte{1, 1, 1, 1})
	f.Add([]byte("PUB a 9999999999\r\n"), []byte{0})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		whole, errWhole := splitAll(string(data))
		var chunks []string
		rest := data
		for len(cuts) >= 2 && len(rest) > 0 {
			n := int(binary.BigEndian.Uint16(cuts[:2])) % (len(rest) + 1)
			cuts = cuts[2:]
			chunks = append(chunks, string(rest[:n]))
			rest = rest[n:]
		}
		chunks = append(chunks, string(rest))
		cut, errCut := splitAll(chunks...)
		if (errWhole == nil) != (errCut == nil) {
			t.Fatalf("whole: %v; cut %q: %v", errWhole, chunks, errCut)
		}
		if !strings.HasPrefix(string(data), strings.Join(whole, "")) || !strings.HasPrefix(string(data), strings.Join(cut, "")) {
			t.Fatalf("operations %q / %q are not the input %q", whole, cut, data)
		}
		if errWhole == nil && strings.Join(whole, "\x00|") != strings.Join(cut, "\x00|") {
			t.Fatalf("operations differ: whole %q, cut %q (%q)", whole, cut, chunks)
		}
	})
}

// FuzzClassify: classification never panics and is consistent: a keyed
// kind has its sid, and only INFO is shown once.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"CONNECT {}\r\n", "SUB a q 1\r\n", "UNSUB 1 2\r\n", "INFO {}\r\n", "PONG\r\n", "PING\r\n"} {
		f.Add([]byte(s))
	}
	p := New()
	f.Fuzz(func(t *testing.T, data []byte) {
		a := p.App(data)
		if a.Keyed != (a.Key != "") || a.Keyed && a.Kind != protocol.AppSubscribe && a.Kind != protocol.AppUnsubscribe {
			t.Fatalf("App(%q) = %+v", data, a)
		}
		if u := p.Upstream(data); u.Once != p.Capabilities().Confirm(data) {
			t.Fatalf("Upstream(%q) = %+v, but Confirm disagrees", data, u)
		}
	})
}

// BenchmarkFramer splits a WebSocket message of 16 MSG operations with
// 256-byte payloads, as a busy server packs them.
func BenchmarkFramer(b *testing.B) {
	data := []byte(strings.Repeat("MSG ticks 1 256\r\n"+strings.Repeat("x", 256)+"\r\n", 16))
	f := newFramer()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if msgs, err := f.Split(ws.OpBinary, data); err != nil || len(msgs) != 16 {
			b.Fatal(len(msgs), err)
		}
	}
}
