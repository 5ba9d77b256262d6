package transport

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/loopback"
	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/sse"
)

// awaitWaiting returns once a sender is blocked in q's Reserve (Waiting is
// set under the queue's lock before it waits), failing if none is within
// lineTimeout or if sent reports first.
func awaitWaiting(t *testing.T, q *sendq.Queue, sent <-chan error) {
	t.Helper()
	deadline := time.Now().Add(lineTimeout)
	for !q.Waiting() {
		select {
		case err := <-sent:
			t.Fatalf("send returned %v instead of blocking", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no send blocked within %v", lineTimeout)
		}
		runtime.Gosched()
	}
}

// A batch of lines keeps the order and the policies of single Sends: a
// dropped message is left out and counted, and a close policy in the middle
// of a batch still delivers the lines before it, then ends the socket;
// nothing added after the close is queued or counted as a drop.
func TestLineBatch(t *testing.T) {
	bin := []byte{0, '\n', 0xff}
	c, client, d := newTestLineConn(t, LineOptions{Binary: BinaryDrop, Newline: NewlineClose, CloseWait: 100 * time.Millisecond})
	var b sendq.Batch
	c.Append(&b, ws.OpText, []byte("one"))
	c.Append(&b, ws.OpBinary, bin) // dropped
	c.Append(&b, ws.OpText, []byte("two"))
	if b.Len() != 2 || b.Bytes() != int64(len("one\ntwo\n")) {
		t.Fatalf("batch holds %d lines, %d bytes; want 2 lines, %d bytes", b.Len(), b.Bytes(), len("one\ntwo\n"))
	}
	if n, err := c.SendBatch(context.Background(), &b); n != 2 || err != nil {
		t.Fatalf("SendBatch: %d queued, %v", n, err)
	}
	c.Append(&b, ws.OpText, []byte("three"))
	c.Append(&b, ws.OpText, []byte("a\nb")) // closes, after "three"
	c.Append(&b, ws.OpBinary, bin)          // too late to count
	if b.Len() != 0 {
		t.Fatalf("batch holds %d lines after the close policy, want none", b.Len())
	}
	if n, err := c.SendBatch(context.Background(), &b); n != 0 || err != nil {
		t.Fatalf("SendBatch of the emptied batch: %d, %v", n, err)
	}
	if got := readAll(t, client); got != "one\ntwo\nthree\n" {
		t.Errorf("app read %q, want the three lines before the close", got)
	}
	awaitDone(t, c, 2*time.Second)
	reasons, delivered := d.get()
	if strings.Join(reasons, ",") != DropBinary+","+DropNewline || delivered != 3 {
		t.Errorf("dropped %v and delivered %d, want [binary newline] and 3", reasons, delivered)
	}
}

// stalledConn is a real socket whose writes wait until stall is closed: a
// writer stuck on an app that does not read, for as long as the test
// wants.
type stalledConn struct {
	*net.TCPConn
	stall chan struct{}
}

func (s stalledConn) Write(b []byte) (int, error) {
	<-s.stall
	return s.TCPConn.Write(b)
}

// Closing the app wakes a Send blocked on a full queue, which returns
// ErrLineClosed at once, while the writer is still stuck; what was queued
// is still written once the app reads.
func TestLineCloseWhileSendWaits(t *testing.T) {
	server, client := loopback.Pair(t)
	nc := stalledConn{server.(*net.TCPConn), make(chan struct{})}
	c := NewLineConn(nc, LineOptions{QueueBytes: 4 << 10, CloseWait: lineTimeout})
	unstall := sync.OnceFunc(func() { close(nc.stall) })
	t.Cleanup(func() {
		unstall()
		c.Abort()
		<-c.Done()
	})
	line := []byte(strings.Repeat("w", 1023))
	sent := make(chan error, 1)
	go func() {
		for {
			if err := c.Send(context.Background(), ws.OpText, line); err != nil {
				sent <- err
				return
			}
		}
	}()
	awaitWaiting(t, &c.q, sent) // the writer holds the first line, the queue is full
	c.Close(ws.StatusGoingAway, "tether shutting down")
	select {
	case err := <-sent:
		if !errors.Is(err, ErrLineClosed) {
			t.Fatalf("blocked Send after Close: %v, want ErrLineClosed", err)
		}
	case <-time.After(lineTimeout):
		t.Fatal("Close did not wake the blocked Send")
	}
	unstall()
	got := readAll(t, client)
	if len(got) != 4<<10 || strings.Trim(got, "w\n") != "" {
		t.Errorf("app read %d bytes, want the 4 lines queued before the close", len(got))
	}
}

// pendingEvents parses the events an SSEApp's pending log would write.
func pendingEvents(t *testing.T, a *SSEApp) []sse.Event {
	t.Helper()
	a.mu.Lock()
	parts, _ := a.log.take(nil, 1<<30)
	a.mu.Unlock()
	r := sse.NewReader(bytes.NewReader(bytes.Join(parts, nil)), sse.Options{})
	var evs []sse.Event
	for {
		item, err := r.Next()
		if err != nil {
			return evs
		}
		if item.Kind == sse.KindEvent {
			evs = append(evs, item.Event)
		}
	}
}

// Messages batched for an sse:// app become events numbered in order,
// binary ones base64 as with Send; SendBatch reports them all queued.
func TestSSEBatch(t *testing.T) {
	a := NewSSEApp(SSEOptions{})
	var b sendq.Batch
	a.Append(&b, ws.OpText, []byte("first"))
	a.Append(&b, ws.OpBinary, []byte{0, 1, 2})
	if n, err := a.SendBatch(context.Background(), &b); n != 2 || err != nil {
		t.Fatalf("SendBatch: %d queued, %v", n, err)
	}
	if err := a.Send(context.Background(), ws.OpText, []byte("third")); err != nil {
		t.Fatal(err)
	}
	evs := pendingEvents(t, a)
	want := []string{"first", base64.StdEncoding.EncodeToString([]byte{0, 1, 2}), "third"}
	if len(evs) != len(want) {
		t.Fatalf("%d events pending, want %d: %+v", len(evs), len(want), evs)
	}
	for i, ev := range evs {
		if ev.Data != want[i] || ev.ID != eventID(a.Token(), uint64(i+1)) {
			t.Errorf("event %d: data %q id %q, want %q and id %d", i, ev.Data, ev.ID, want[i], i+1)
		}
	}
	a.Close(ws.StatusNormalClosure, "")
	<-a.Done()
}

// An sse:// batch keeps the buffer's bound event by event: the events that
// fit are queued, SendBatch waits for room for the next, and reports how
// many it queued when its wait ends, by its context or by Close, which
// also refuses any later Send.
func TestSSEBatchBound(t *testing.T) {
	for _, end := range []string{"context", "close"} {
		t.Run(end, func(t *testing.T) {
			msg := bytes.Repeat([]byte("e"), 1000) // the id line reserved but not used is small beside it
			a := NewSSEApp(SSEOptions{})
			size := eventSize(a.encode(ws.OpText, msg, ""))
			a = NewSSEApp(SSEOptions{QueueBytes: 2*size + size/2}) // two events, not three
			var b sendq.Batch
			for range 4 {
				a.Append(&b, ws.OpText, msg)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				n   int
				err error
			}
			done := make(chan result, 1)
			errs := make(chan error, 1)
			go func() {
				n, err := a.SendBatch(ctx, &b)
				done <- result{n, err}
				errs <- err
			}()
			awaitWaiting(t, &a.q, errs)
			want := error(context.Canceled)
			if end == "context" {
				cancel()
			} else {
				a.Close(ws.StatusGoingAway, "")
				want = ErrSSEClosed
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(lineTimeout):
				t.Fatalf("SendBatch still blocked %v after its wait should have ended (%s)", lineTimeout, end)
			}
			if r.n != 2 || !errors.Is(r.err, want) {
				t.Fatalf("SendBatch: %d queued, %v; want 2 and %v", r.n, r.err, want)
			}
			if got := len(pendingEvents(t, a)); got != 2 {
				t.Errorf("%d events pending, want the 2 that fit", got)
			}
			if q := a.Queued(); q > 2*size {
				t.Errorf("%d bytes queued, over the two events' %d", q, 2*size)
			}
			a.Close(ws.StatusNormalClosure, "")
			if err := a.Send(context.Background(), ws.OpText, msg); !errors.Is(err, ErrSSEClosed) {
				t.Errorf("Send after Close: %v, want ErrSSEClosed", err)
			}
			<-a.Done()
		})
	}
}
