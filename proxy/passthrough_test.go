package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/proxy"
)

// maskedFrame encodes one final text frame as an app sends it, masked with
// key.
func maskedFrame(t *testing.T, p []byte, key [4]byte) []byte {
	t.Helper()
	f := ws.NewFrame(ws.OpText, true, append([]byte(nil), p...))
	f.Header.Masked, f.Header.Mask = true, key
	ws.Cipher(f.Payload, key, 0)
	var b bytes.Buffer
	if err := ws.WriteFrame(&b, f); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readRawFrame reads one frame as it is on the wire, and its payload
// unmasked.
func readRawFrame(t *testing.T, r io.Reader) (raw, payload []byte) {
	t.Helper()
	var wire bytes.Buffer
	h, err := ws.ReadHeader(io.TeeReader(r, &wire))
	if err != nil {
		t.Fatalf("read header: %v", err)
	}
	payload = make([]byte, h.Length)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatalf("read payload: %v", err)
	}
	raw = append(wire.Bytes(), payload...)
	if h.Masked {
		ws.Cipher(payload, h.Mask, 0)
	}
	return raw, payload
}

// App to upstream, through a real proxy: the upstream receives the app's
// plain messages byte for byte as the app sent them, each frame with the
// app's own masking key, in one burst or one by one. A login, which the
// rules read (TETHER_AUTH_MATCH), is tether's to send: it arrives in order,
// with its content, in a frame tether masked itself.
func TestUpstreamReadsTheAppsFrames(t *testing.T) {
	for _, set := range []string{rulesNone, rulesAll} {
		t.Run("rules="+set, func(t *testing.T) {
			p := newBenchPath(t, set)
			deadline := time.Now().Add(testTimeout)
			_ = p.app.SetDeadline(deadline)
			_ = p.upstream.SetDeadline(deadline)
			awaitLive(t, p.srv)
			type sent struct {
				raw, payload []byte
				login        bool
			}
			var msgs []sent
			for i := range 30 {
				payload := fmt.Appendf(nil, `{"op":"event","n":%d,"p":"%s"}`, i, bytes.Repeat([]byte("y"), i*31))
				login := set == rulesAll && i == 7
				if login {
					payload = []byte(`{"op":"login","token":"t"}`)
				}
				raw := maskedFrame(t, payload, [4]byte{byte(i), 0x5a, byte(i * 7), 0xc3})
				msgs = append(msgs, sent{raw: raw, payload: payload, login: login})
			}
			// The first ten one by one, each read before the next is
			// sent; the rest in one write.
			for _, m := range msgs[:10] {
				if _, err := p.app.Write(m.raw); err != nil {
					t.Fatal(err)
				}
				checkArrived(t, p.upR, m.raw, m.payload, m.login)
			}
			var burst []byte
			for _, m := range msgs[10:] {
				burst = append(burst, m.raw...)
			}
			if _, err := p.app.Write(burst); err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs[10:] {
				checkArrived(t, p.upR, m.raw, m.payload, m.login)
			}
		})
	}
}

// checkArrived reads the next frame the upstream received: the app's raw
// frame itself, or, for a message tether sends on its own behalf (own), a
// frame of tether's carrying payload.
func checkArrived(t *testing.T, r io.Reader, raw, payload []byte, own bool) {
	t.Helper()
	got, content := readRawFrame(t, r)
	switch {
	case !bytes.Equal(content, payload):
		t.Fatalf("upstream read %q, the app sent %q", content, payload)
	case own && bytes.Equal(got, raw):
		t.Fatalf("%q arrived in the app's frame, not sent by tether", payload)
	case !own && !bytes.Equal(got, raw):
		t.Fatalf("%q arrived as % x, the app sent % x", payload, got[:min(len(got), 16)], raw[:min(len(raw), 16)])
	}
}

// awaitLive returns once srv's one session has a live connection: the
// app's messages go to it directly, not through the outbox.
func awaitLive(t *testing.T, srv *proxy.Server) {
	t.Helper()
	eventually(t, "the session's connection live", func() bool {
		st := srv.Status()
		return len(st.Sessions) == 1 && st.Sessions[0].Live
	})
}

// Upstream to app, through a real proxy: the app reads the upstream's
// frames byte for byte, and with sequencing on, which reads every message
// (TETHER_SEQ_PATH), a repeated number is still dropped and the rest
// arrive in order.
func TestAppReadsTheUpstreamsFrames(t *testing.T) {
	for _, set := range []string{rulesNone, rulesSeq} {
		t.Run("rules="+set, func(t *testing.T) {
			p := newBenchPath(t, set)
			deadline := time.Now().Add(testTimeout)
			_ = p.app.SetDeadline(deadline)
			_ = p.upstream.SetDeadline(deadline)
			seqs := []int{1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10}
			var sent [][]byte
			for i, n := range seqs {
				msg, at := benchMessage(64 + i*200)
				putSeq(msg[at:at+16], seqBase+uint64(n))
				var b bytes.Buffer
				if err := ws.WriteFrame(&b, ws.NewTextFrame(msg)); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, b.Bytes())
			}
			// Four one by one, each read before the next is sent; the rest
			// in one write.
			want := func(i int) []byte {
				if set == rulesSeq && i >= 4 {
					return sent[i+1] // the repeated 4 is dropped
				}
				return sent[i]
			}
			for i := range 4 {
				if _, err := p.upstream.Write(sent[i]); err != nil {
					t.Fatal(err)
				}
				if got, _ := readRawFrame(t, p.appR); !bytes.Equal(got, want(i)) {
					t.Fatalf("message %d: the app read other bytes than the upstream sent", i)
				}
			}
			if _, err := p.upstream.Write(bytes.Join(sent[4:], nil)); err != nil {
				t.Fatal(err)
			}
			n := len(sent)
			if set == rulesSeq {
				n--
			}
			for i := 4; i < n; i++ {
				if got, _ := readRawFrame(t, p.appR); !bytes.Equal(got, want(i)) {
					t.Fatalf("message %d: the app read other bytes than the upstream sent", i)
				}
			}
		})
	}
}
