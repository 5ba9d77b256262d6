package wsconn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// relayFrames reads n messages from src and forwards each to dst as the
// proxy does: the frame as it arrived when dst takes it, the payload
// encoded again otherwise. It checks that each payload read is want(i),
// unmasked, before the frame is asked for, and returns how many messages
// went through as frames.
func relayFrames(t *testing.T, src, dst *wsconn.Conn, n int, want func(int) []byte) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var b sendq.Batch
	passed := 0
	for i := range n {
		op, p, err := src.ReadMessageFlushing(func() {
			if _, err := dst.SendBatch(ctx, &b); err != nil {
				t.Errorf("SendBatch: %v", err)
			}
		})
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !bytes.Equal(p, want(i)) {
			t.Fatalf("message %d read as %q, want %q", i, p, want(i))
		}
		if f := src.Frame(); f == nil {
			dst.Append(&b, op, p)
		} else if dst.AppendFrame(&b, f) {
			passed++
		}
	}
	if _, err := dst.SendBatch(ctx, &b); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	return passed
}

// App to upstream: the frames the upstream receives are the bytes the app
// sent, masking keys included, while tether read each payload unmasked.
// Frames that are not whole in one frame (a fragmented message) are
// encoded again, and arrive as one frame with the same payload.
func TestFramePassThroughToUpstream(t *testing.T) {
	app, appPeer := serverSide(t, wsconn.Options{})
	up, upPeer := clientSide(t, wsconn.Options{})
	msg := func(i int) []byte { return fmt.Appendf(nil, `{"n":%d,"p":"%s"}`, i, bytes.Repeat([]byte("x"), i*37)) }
	const whole = 20
	var sent []byte
	for i := range whole {
		sent = append(sent, encode(t, clientFrame(ws.OpText, true, msg(i)))...)
	}
	// One write of a few KiB reaches the reader in one read on loopback:
	// every frame sits whole in the read buffer.
	writeRawBytes(t, appPeer, sent)
	// A fragmented message: not one frame, so tether encodes it itself.
	half := len(msg(whole)) / 2
	writeRaw(t, appPeer, clientFrame(ws.OpText, false, msg(whole)[:half]), clientFrame(ws.OpContinuation, true, msg(whole)[half:]))

	if passed := relayFrames(t, app, up, whole+1, msg); passed != whole {
		t.Fatalf("%d of %d whole frames passed through", passed, whole)
	}
	got := make([]byte, len(sent))
	if _, err := io.ReadFull(upPeer, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("upstream received %d bytes that differ from the %d the app sent", len(got), len(sent))
	}
	f := mustReadFrame(t, upPeer, true)
	if !f.hdr.Fin || f.hdr.OpCode != ws.OpText || !bytes.Equal(f.payload, msg(whole)) {
		t.Fatalf("reassembled message arrived as %v fin=%v %q", f.hdr.OpCode, f.hdr.Fin, f.payload)
	}
}

// Upstream to app: the app receives the upstream's frames byte for byte.
func TestFramePassThroughToApp(t *testing.T) {
	up, upPeer := clientSide(t, wsconn.Options{})
	app, appPeer := serverSide(t, wsconn.Options{})
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1+i*90) }
	const n = 12
	var sent []byte
	for i := range n {
		sent = append(sent, encode(t, ws.NewFrame(ws.OpBinary, true, msg(i)))...)
	}
	writeRawBytes(t, upPeer, sent)
	if passed := relayFrames(t, up, app, n, msg); passed != n {
		t.Fatalf("%d of %d frames passed through", passed, n)
	}
	got := make([]byte, len(sent))
	if _, err := io.ReadFull(appPeer, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatal("the app received other bytes than the upstream sent")
	}
}

// A frame whose masking is not the Conn's, or that the Conn would
// compress, is encoded again, with its payload and opcode.
func TestAppendFrameEncodesAgain(t *testing.T) {
	srv, srvPeer := serverSide(t, wsconn.Options{})
	cli, cliPeer := clientSide(t, wsconn.Options{Deflate: &wsconn.Deflate{Compress: true}})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	big := bytes.Repeat([]byte("abcd"), wsconn.CompressMinBytes)
	for _, tc := range []struct {
		name               string
		c                  *wsconn.Conn
		peer               io.Reader
		frame              ws.Frame
		masked, compressed bool
	}{
		{"masked to a server", srv, srvPeer, clientFrame(ws.OpBinary, true, []byte("abc")), false, false},
		{"plain to a client", cli, cliPeer, ws.NewFrame(ws.OpText, true, []byte("abc")), true, false},
		{"to be compressed", cli, cliPeer, clientFrame(ws.OpText, true, big), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b sendq.Batch
			payload := append([]byte(nil), tc.frame.Payload...)
			if tc.frame.Header.Masked {
				ws.Cipher(payload, tc.frame.Header.Mask, 0)
			}
			if tc.c.AppendFrame(&b, encode(t, tc.frame)) {
				t.Fatal("appended as it is")
			}
			if _, err := tc.c.SendBatch(ctx, &b); err != nil {
				t.Fatal(err)
			}
			f, err := readFrame(tc.peer)
			if err != nil {
				t.Fatal(err)
			}
			if f.hdr.Masked != tc.masked || !f.hdr.Fin || f.hdr.OpCode != tc.frame.Header.OpCode || (f.hdr.Rsv != 0) != tc.compressed {
				t.Fatalf("arrived as %v masked=%v fin=%v RSV %b", f.hdr.OpCode, f.hdr.Masked, f.hdr.Fin, f.hdr.Rsv)
			}
			if !tc.compressed && !bytes.Equal(f.payload, payload) {
				t.Fatalf("payload %q, want %q", f.payload, payload)
			}
		})
	}
}

// QueueBatch queues a batch whole, or with the error leaves it to the
// caller, whose frames NextFrame and FrameMessage give back as the
// messages they were.
func TestQueueBatchKeepsWhatItRefused(t *testing.T) {
	up, upPeer := clientSide(t, wsconn.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var b sendq.Batch
	up.Append(&b, ws.OpText, []byte("one"))
	if err := up.QueueBatch(ctx, &b); err != nil || b.Len() != 0 {
		t.Fatalf("QueueBatch: %v, %d messages left", err, b.Len())
	}
	if f := mustReadFrame(t, upPeer, true); string(f.payload) != "one" {
		t.Fatalf("upstream read %q", f.payload)
	}
	up.Abort()
	msgs := []string{"two", "three", "four"}
	up.Append(&b, ws.OpText, []byte(msgs[0]))
	up.AppendFrame(&b, encode(t, clientFrame(ws.OpBinary, true, []byte(msgs[1]))))
	up.Append(&b, ws.OpText, []byte(msgs[2]))
	if err := up.QueueBatch(ctx, &b); !errors.Is(err, wsconn.ErrClosed) || b.Len() != 3 {
		t.Fatalf("QueueBatch after Abort: %v, %d messages left; want ErrClosed and all 3", err, b.Len())
	}
	w, _ := b.Take()
	defer sendq.PutBuf(w)
	var got []string
	for rest := w.B; len(rest) > 0; {
		var f []byte
		f, rest = wsconn.NextFrame(rest)
		_, p := wsconn.FrameMessage(f)
		got = append(got, string(p))
	}
	if fmt.Sprint(got) != fmt.Sprint(msgs) {
		t.Fatalf("took back %q, want %q", got, msgs)
	}
}
