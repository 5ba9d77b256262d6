package wsconn_test

import (
	"bufio"
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

// Batches and single Sends interleave in the order they were queued, each
// message a frame of its own, masked on the client side; batches that fit the
// last queued segment and batches larger than a segment alike.
func TestSendBatchOrder(t *testing.T) {
	for _, client := range []bool{false, true} {
		t.Run(fmt.Sprintf("client=%v", client), func(t *testing.T) {
			p := newRawPair(t)
			nc, peer := p.server, p.client
			if client {
				nc, peer = p.client, p.server
			}
			c := wrap(t, nc, nil, wsconn.Options{Client: client})
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var b sendq.Batch
			seq := 0
			for _, run := range []struct{ batch, size int }{{1, 64}, {0, 64}, {5, 100}, {0, 70 << 10}, {40, 4 << 10}, {3, 10}} {
				if run.batch == 0 {
					mustSend(t, c, ws.OpBinary, numbered(seq, run.size))
					seq++
					continue
				}
				for range run.batch {
					c.Append(&b, ws.OpBinary, numbered(seq, run.size))
					seq++
				}
				if b.Len() != run.batch || b.Bytes() != int64(run.batch*run.size) {
					t.Fatalf("batch holds %d messages, %d bytes, want %d, %d", b.Len(), b.Bytes(), run.batch, run.batch*run.size)
				}
				if n, err := c.SendBatch(ctx, &b); err != nil || n != run.batch {
					t.Fatalf("SendBatch: %d messages queued, %v; want %d", n, err, run.batch)
				}
				if b.Len() != 0 || b.Bytes() != 0 {
					t.Fatalf("batch not emptied: %d messages, %d bytes", b.Len(), b.Bytes())
				}
			}
			if err := readMasked(bufio.NewReaderSize(peer, 64<<10), seq, client); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// readMasked reads n numbered binary messages, checking the masking of each.
func readMasked(r *bufio.Reader, n int, masked bool) error {
	for seq := range n {
		f, err := readFrame(r)
		if err != nil {
			return fmt.Errorf("message %d: %w", seq, err)
		}
		if f.hdr.Masked != masked || !f.hdr.Fin || f.hdr.OpCode != ws.OpBinary {
			return fmt.Errorf("message %d: %v fin=%v masked=%v, want a final binary frame masked=%v",
				seq, f.hdr.OpCode, f.hdr.Fin, f.hdr.Masked, masked)
		}
		if !bytes.Equal(f.payload, numbered(seq, len(f.payload))) {
			return fmt.Errorf("message %d: wrong payload", seq)
		}
	}
	return nil
}

// SendBatch copies nothing it is given back: the caller reuses its payloads
// at once after Append, as with Send.
func TestAppendCopiesPayload(t *testing.T) {
	srv, cli := bothSides(t, wsconn.Options{}, wsconn.Options{})
	var b sendq.Batch
	p := []byte("first")
	srv.Append(&b, ws.OpText, p)
	copy(p, "XXXXX")
	srv.Append(&b, ws.OpText, p)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := srv.SendBatch(ctx, &b); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	checkMessage(t, cli, ws.OpText, []byte("first"))
	checkMessage(t, cli, ws.OpText, []byte("XXXXX"))
}

// A batch counts against QueueBytes like the messages it holds: behind a full
// queue SendBatch blocks until the context ends, then drops the batch; an
// empty batch is a no-op; after Close it fails with ErrClosed.
//
// The queue must stay full while SendBatch waits, so the writes stall until
// the peer reads (stalledConn): behind a peer that only stopped reading,
// the fill stopped at a Send that had waited for a starved writer, the
// writer then drained the queue into the socket buffers, and SendBatch
// found room (5 of 60 runs at load 12).
func TestSendBatchBackpressureAndClose(t *testing.T) {
	const queueBytes, size = 1 << 10, 256
	p := newRawPair(t)
	nc := stallWrites(p.server)
	srv := wrap(t, nc, nil, wsconn.Options{QueueBytes: queueBytes, CloseWait: closeWait})
	sent := fillUntilBlocked(t, srv, size, nil)

	var b sendq.Batch
	srv.Append(&b, ws.OpBinary, numbered(sent, size))
	ctx, cancel := context.WithTimeout(context.Background(), blockedAfter)
	n, err := srv.SendBatch(ctx, &b)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || n != 0 || b.Len() != 0 {
		t.Fatalf("SendBatch behind a full queue: %v, %d queued, %d messages left, want context.DeadlineExceeded, none queued and an empty batch", err, n, b.Len())
	}
	if n, err := srv.SendBatch(context.Background(), &b); err != nil || n != 0 {
		t.Fatalf("SendBatch of an empty batch: %d, %v", n, err)
	}

	got := rawReader(p.client, sent+1)
	nc.resume()
	srv.Append(&b, ws.OpBinary, numbered(sent, size))
	ctx, cancel = context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if n, err := srv.SendBatch(ctx, &b); err != nil || n != 1 {
		t.Fatalf("SendBatch once the peer reads: %d queued, %v", n, err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	srv.Close(ws.StatusNormalClosure, "")
	srv.Append(&b, ws.OpBinary, numbered(0, size))
	if n, err := srv.SendBatch(ctx, &b); !errors.Is(err, wsconn.ErrClosed) || n != 0 {
		t.Fatalf("SendBatch after Close: %d queued, %v, want ErrClosed", n, err)
	}
}

// MessageBuffered is true exactly while a whole message waits in the read
// buffer: after a burst arrived in one read, until its last message is read
// (behind a ping, in fragments, or whole); false for a message cut short.
// Through a bufio.Reader (TLS) too.
func TestMessageBuffered(t *testing.T) {
	for _, opaque := range []bool{false, true} {
		t.Run(fmt.Sprintf("opaque=%v", opaque), func(t *testing.T) {
			p := newRawPair(t)
			nc := p.server
			if opaque {
				nc = opaqueConn{p.server}
			}
			srv := wrap(t, nc, nil, wsconn.Options{})
			if srv.MessageBuffered() {
				t.Fatal("MessageBuffered before anything arrived")
			}
			three := string(bytes.Repeat([]byte("3"), 300))
			burst := encode(t, clientFrame(ws.OpText, true, []byte("one")),
				clientFrame(ws.OpPing, true, nil),
				clientFrame(ws.OpText, false, []byte("tw")), clientFrame(ws.OpContinuation, true, []byte("o")),
				clientFrame(ws.OpBinary, true, []byte(three)),
				clientFrame(ws.OpBinary, true, []byte("x")),
				clientFrame(ws.OpBinary, true, []byte("four")))
			writeRawBytes(t, p.client, burst[:len(burst)-1])
			for _, step := range []struct {
				want     string
				buffered bool // what follows is whole in the buffer
			}{{"one", true}, {"two", true}, {three, true}, {"x", false}} {
				_, got := mustRead(t, srv)
				if string(got) != step.want {
					t.Fatalf("read %.10q, want %.10q", got, step.want)
				}
				if b := srv.MessageBuffered(); b != step.buffered {
					t.Fatalf("after %.10q: MessageBuffered = %v, want %v", step.want, b, step.buffered)
				}
			}
			writeRawBytes(t, p.client, burst[len(burst)-1:])
			if _, got := mustRead(t, srv); string(got) != "four" {
				t.Fatalf("read %q, want \"four\"", got)
			}
		})
	}
}

// ReadMessageFlushing calls flush before any read that may wait for the
// socket: before the first message, and before one the read buffer does not
// hold whole; not before a message already buffered, whole or in fragments.
// The last byte of the cut message is only written by flush itself, so a read
// that waited without flushing first would never end. Through a bufio.Reader
// (TLS) too.
func TestReadMessageFlushing(t *testing.T) {
	for _, opaque := range []bool{false, true} {
		t.Run(fmt.Sprintf("opaque=%v", opaque), func(t *testing.T) {
			p := newRawPair(t)
			nc := p.server
			if opaque {
				nc = opaqueConn{p.server}
			}
			srv := wrap(t, nc, nil, wsconn.Options{})
			three := string(bytes.Repeat([]byte("3"), 300))
			burst := encode(t, clientFrame(ws.OpText, true, []byte("one")),
				clientFrame(ws.OpPing, true, nil),
				clientFrame(ws.OpText, false, []byte("tw")), clientFrame(ws.OpContinuation, true, []byte("o")),
				clientFrame(ws.OpBinary, true, []byte(three)),
				clientFrame(ws.OpBinary, true, []byte("four")))
			writeRawBytes(t, p.client, burst[:len(burst)-1])
			flushes := 0
			flush := func() {
				flushes++
				if flushes == 2 {
					writeRawBytes(t, p.client, burst[len(burst)-1:])
				}
			}
			for _, step := range []struct {
				want    string
				flushes int
			}{{"one", 1}, {"two", 1}, {three, 1}, {"four", 2}} {
				_, got, err := srv.ReadMessageFlushing(flush)
				if err != nil {
					t.Fatalf("ReadMessageFlushing: %v", err)
				}
				if string(got) != step.want || flushes != step.flushes {
					t.Fatalf("read %.10q after %d flushes, want %.10q after %d", got, flushes, step.want, step.flushes)
				}
			}
		})
	}
}

func writeRawBytes(t *testing.T, w io.Writer, b []byte) {
	t.Helper()
	if _, err := w.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}
