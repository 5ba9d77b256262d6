package stomp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/gobwas/ws"
)

// splitAll feeds msgs to a new Framer, one WebSocket message each, and
// returns every protocol message it gave, copied, with the first error.
func splitAll(msgs ...string) ([]string, error) {
	f := newFramer()
	var out []string
	for _, m := range msgs {
		got, err := f.Split(ws.OpText, []byte(m))
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
		send    = "SEND\ndestination:/queue/a\n\nhello\x00"
		sendCL  = "SEND\ndestination:/queue/a\ncontent-length:5\n\nhe\x00lo\x00"
		connect = "CONNECT\r\naccept-version:1.2\r\nheart-beat:2000,2000\r\n\r\n\x00"
	)
	cases := []struct {
		name string
		in   []string
		want []string
		err  error
	}{
		{"one frame", []string{send}, []string{send}, nil},
		{"CRLF lines", []string{connect}, []string{connect}, nil},
		{"a heart-beat", []string{"\n"}, []string{"\n"}, nil},
		{"CRLF heart-beats", []string{"\r\n\n"}, []string{"\r\n\n"}, nil},
		{"a CR cut from its LF", []string{"\r", "\n"}, []string{"\r\n"}, nil},
		{"two frames in one message", []string{send + sendCL}, []string{send, sendCL}, nil},
		{"EOLs behind a frame stay with it", []string{send + "\n\n" + sendCL}, []string{send + "\n\n", sendCL}, nil},
		{"EOLs before a frame are a heart-beat", []string{"\n" + send}, []string{"\n", send}, nil},
		{"a NUL in a content-length body", []string{sendCL}, []string{sendCL}, nil},
		{"a frame cut in its headers", []string{send[:7], send[7:]}, []string{send}, nil},
		{"a frame cut in its body", []string{send[:30], send[30:] + "\n"}, []string{send + "\n"}, nil},
		{"a content-length body cut at its NUL", []string{sendCL[:len(sendCL)-1], sendCL[len(sendCL)-1:]}, []string{sendCL}, nil},
		{"byte by byte", strings.Split(send+sendCL, ""), []string{send, sendCL}, nil},
		{"first content-length counts", []string{"SEND\ncontent-length:1\ncontent-length:x\n\na\x00"}, []string{"SEND\ncontent-length:1\ncontent-length:x\n\na\x00"}, nil},
		{"a NUL in the headers ends the frame", []string{"SEND\nid:1\x00" + send}, []string{"SEND\nid:1\x00", send}, nil},
		{"bad content-length", []string{send + "SEND\ncontent-length:-1\n\n\x00"}, []string{send}, ErrContentLength},
		{"no NUL after the content-length", []string{"SEND\ncontent-length:1\n\nab\x00"}, nil, ErrContentLength},
		{"an unended frame no larger than the bound", []string{"SEND\n\n" + strings.Repeat("x", 1000)}, nil, nil},
	}
	for _, c := range cases {
		got, err := splitAll(c.in...)
		if !errors.Is(err, c.err) || strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: Split(%q) = %q, %v; want %q, %v", c.name, c.in, got, err, c.want, c.err)
		}
	}
}

// A frame that grows past MaxFrameBytes is refused, whether its
// content-length says so or its NUL never comes.
func TestFramerBound(t *testing.T) {
	if _, err := splitAll("SEND\ncontent-length:99999999999\n\n"); !errors.Is(err, ErrContentLength) {
		t.Errorf("an oversized content-length: %v", err)
	}
	f := newFramer()
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	var err error
	if _, err = f.Split(ws.OpText, []byte("SEND\n\n")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= MaxFrameBytes>>20 && err == nil; i++ {
		_, err = f.Split(ws.OpText, chunk)
	}
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("a frame without NUL over %d bytes: %v", MaxFrameBytes, err)
	}
}

// normal is what a stream of protocol messages means whatever the
// WebSocket messages it came in: its frames, without the EOLs behind them.
func normal(msgs []string) []string {
	var out []string
	for _, m := range msgs {
		if isHeartbeat([]byte(m)) {
			continue
		}
		out = append(out, strings.TrimRight(m, "\r\n"))
	}
	return out
}

// FuzzFramer: arbitrary bytes cut at arbitrary points. Split never panics;
// without an error, the messages it returns are the input, in order, up to
// an incomplete frame; and the frames are the same however the input was
// cut (heart-beats aside, which a cut may split or join), and so is
// whether it fails.
func FuzzFramer(f *testing.F) {
	f.Add([]byte("CONNECT\naccept-version:1.2\n\n\x00\nSEND\ncontent-length:3\n\na\x00b\x00\n\r\n"), []byte{3, 9, 200})
	f.Add([]byte("SUBSCRIBE\nid:0\ndestination:/topic/x\n\n\x00MESSAGE\n\nhi\x00"), []byte{1, 1, 1, 1})
	f.Add([]byte("\r\n\r\r\n\x00\x00"), []byte{0, 1})
	f.Add([]byte("SEND\ncontent-length:2\n\nab\x01"), []byte{5})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		whole, errWhole := splitAll(string(data))
		var chunks []string
		rest := data
		for len(cuts) >= 1 && len(rest) > 0 {
			n := int(cuts[0]) % (len(rest) + 1)
			if len(cuts) >= 2 {
				n = int(binary.BigEndian.Uint16(cuts[:2])) % (len(rest) + 1)
				cuts = cuts[1:]
			}
			cuts = cuts[1:]
			chunks = append(chunks, string(rest[:n]))
			rest = rest[n:]
		}
		chunks = append(chunks, string(rest))
		cut, errCut := splitAll(chunks...)
		if (errWhole == nil) != (errCut == nil) {
			t.Fatalf("whole: %v; cut %q: %v", errWhole, chunks, errCut)
		}
		if errWhole == nil && !strings.HasPrefix(string(data), strings.Join(whole, "")) {
			t.Fatalf("messages %q are not the input %q", whole, data)
		}
		if errWhole == nil && !strings.HasPrefix(string(data), strings.Join(cut, "")) {
			t.Fatalf("messages %q of %q are not the input", cut, chunks)
		}
		if a, b := normal(whole), normal(cut); strings.Join(a, "\x01|") != strings.Join(b, "\x01|") {
			if errWhole == nil || !strings.HasPrefix(strings.Join(a, "\x01|"), strings.Join(b, "\x01|")) && !strings.HasPrefix(strings.Join(b, "\x01|"), strings.Join(a, "\x01|")) {
				t.Fatalf("frames differ: whole %q, cut %q (%q)", a, b, chunks)
			}
		}
	})
}

// BenchmarkFramer splits a WebSocket message of 16 MESSAGE frames with
// content-length bodies of 256 bytes, as a busy broker sends them.
func BenchmarkFramer(b *testing.B) {
	frame := "MESSAGE\nsubscription:0\nmessage-id:T_0@@session-x@@1\ndestination:/topic/a\ncontent-length:256\n\n" + strings.Repeat("x", 256) + "\x00\n"
	data := []byte(strings.Repeat(frame, 16))
	f := newFramer()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if msgs, err := f.Split(ws.OpText, data); err != nil || len(msgs) != 16 {
			b.Fatal(len(msgs), err)
		}
	}
}
