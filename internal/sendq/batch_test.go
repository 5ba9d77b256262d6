package sendq

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/tetherproxy/tether/internal/loopback"
)

// A Batch counts what its owner added, hands it over whole, and is empty
// after.
func TestBatch(t *testing.T) {
	var b Batch
	if w, n := b.Take(); w != nil || n != 0 || b.Len() != 0 || b.Bytes() != 0 {
		t.Fatalf("zero batch: Take %v, %d; Len %d, Bytes %d", w, n, b.Len(), b.Bytes())
	}
	for _, m := range []string{"ab", "cde"} {
		w := b.Add()
		w.B = append(w.B, m...)
		w.Count += int64(len(m))
	}
	if b.Len() != 2 || b.Bytes() != 5 {
		t.Fatalf("Len %d, Bytes %d, want 2, 5", b.Len(), b.Bytes())
	}
	w, n := b.Take()
	if n != 2 || string(w.B) != "abcde" || w.Count != 5 {
		t.Fatalf("Take: %d messages, %q counting %d", n, w.B, w.Count)
	}
	if b.Len() != 0 || b.Bytes() != 0 {
		t.Fatalf("batch not emptied: Len %d, Bytes %d", b.Len(), b.Bytes())
	}
	w.Final = true
	PutBuf(w)
	if w := GetBuf(); len(w.B) != 0 || w.Count != 0 || w.Final {
		t.Fatalf("pooled Buf not reset: %d bytes, count %d, final %v", len(w.B), w.Count, w.Final)
	}
}

// streamOwner is a complete owner over a real socket: senders queue
// messages singly or in batches, one writer goroutine takes the whole
// queue at once and writes it. It records the most bytes ever queued.
type streamOwner struct {
	mu      sync.Mutex
	q       Queue
	out     []byte
	maxSeen int64
	counted int64
	wake    chan struct{}
	done    chan struct{}
}

var errStreamClosed = fmt.Errorf("stream closed")

func newStreamOwner(nc net.Conn, limit int64) *streamOwner {
	o := &streamOwner{wake: make(chan struct{}, 1), done: make(chan struct{})}
	o.q.Init(&o.mu, Options{Limit: limit, Closed: errStreamClosed, Wake: func() {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}})
	go o.write(nc)
	return o
}

func (o *streamOwner) sendBatch(ctx context.Context, b *Batch) error {
	w, _ := b.Take()
	if w == nil {
		return nil
	}
	defer PutBuf(w)
	if err := o.q.Reserve(ctx, w.Count); err != nil {
		return err
	}
	o.out = append(o.out, w.B...)
	o.counted += w.Count
	o.maxSeen = max(o.maxSeen, o.counted)
	o.q.AddLocked(w.Count)
	o.mu.Unlock()
	return nil
}

// write is the writer: woken once per burst, it writes until nothing is
// queued, and exits once the queue is closed and empty.
func (o *streamOwner) write(nc net.Conn) {
	defer close(o.done)
	defer nc.Close()
	var spare []byte
	for range o.wake {
		for {
			o.mu.Lock()
			b := o.out
			if len(b) == 0 {
				o.q.IdleLocked()
				closed := o.q.Closed()
				o.mu.Unlock()
				if closed {
					return
				}
				break
			}
			o.out, spare = spare[:0], nil
			o.mu.Unlock()
			if _, err := nc.Write(b); err != nil {
				return
			}
			o.mu.Lock()
			o.counted -= int64(len(b))
			o.q.ReleaseLocked(int64(len(b)))
			spare = b
			o.mu.Unlock()
		}
	}
}

func (o *streamOwner) close() {
	o.mu.Lock()
	o.q.CloseLocked()
	o.q.WakeLocked()
	o.mu.Unlock()
}

// Many senders through one queue onto a loopback socket: each sender's
// messages arrive whole and in its order, and the queue never held more
// than its limit, though the reader is slower than the senders.
func TestConcurrentSendersStayBounded(t *testing.T) {
	const limit, senders, perSender, size = 4 << 10, 4, 500, 100
	srv, cli := loopback.Pair(t)
	o := newStreamOwner(srv, limit)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(cli)
		got <- b
	}()
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for s := range senders {
		wg.Go(func() {
			var b Batch
			for i := range perSender {
				w := b.Add()
				w.B = fmt.Appendf(w.B, "%c%0*d\n", 'a'+s, size-2, i)
				w.Count += size
				if b.Len() == 3 || i == perSender-1 {
					if err := o.sendBatch(context.Background(), &b); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	o.close()
	<-o.done
	data := <-got
	next := make([]int, senders)
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		s := int(line[0] - 'a')
		if want := fmt.Sprintf("%c%0*d", 'a'+s, size-2, next[s]); string(line) != want {
			t.Fatalf("read %q, want %q", line, want)
		}
		next[s]++
	}
	for s, n := range next {
		if n != perSender {
			t.Errorf("sender %d: %d messages arrived, want %d", s, n, perSender)
		}
	}
	// A batch of three messages is 300 bytes, well under the limit: the
	// oversized exception never applies.
	if o.maxSeen > limit {
		t.Errorf("queue held %d bytes, over its %d-byte limit", o.maxSeen, limit)
	}
	if q := o.q.Queued(); q != 0 {
		t.Errorf("%d bytes still counted after everything was written", q)
	}
}
