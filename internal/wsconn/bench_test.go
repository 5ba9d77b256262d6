package wsconn_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/wsconn"
)

// BenchmarkSend measures Send through the writer onto loopback, server to client,
// with a wsconn client reading everything. The timer stops once the last message
// has arrived, so the figure includes the write, not just the enqueue.
func BenchmarkSend(b *testing.B) {
	for _, size := range []int{64, 1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			srv, cli := bothSides(b, wsconn.Options{}, wsconn.Options{})
			payload := pattern(0, size)
			read := countMessages(cli, b.N)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := srv.Send(ctx, ws.OpBinary, payload); err != nil {
					b.Fatalf("Send: %v", err)
				}
			}
			if err := <-read; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkSendBatch is BenchmarkSend with the messages queued in batches of
// up to 16 KiB (what the proxy gathers while more upstream messages wait in
// its read buffer): one lock and one wake-up per batch instead of per message.
func BenchmarkSendBatch(b *testing.B) {
	for _, size := range []int{64, 1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			srv, cli := bothSides(b, wsconn.Options{}, wsconn.Options{})
			payload := pattern(0, size)
			read := countMessages(cli, b.N)
			ctx := context.Background()
			var batch sendq.Batch
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				srv.Append(&batch, ws.OpBinary, payload)
				if batch.Bytes() >= 16<<10 || i == b.N-1 {
					if _, err := srv.SendBatch(ctx, &batch); err != nil {
						b.Fatalf("SendBatch: %v", err)
					}
				}
			}
			if err := <-read; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// countMessages reads n messages on its own goroutine and reports how that went.
func countMessages(c *wsconn.Conn, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if _, _, err := c.ReadMessage(); err != nil {
				done <- fmt.Errorf("message %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	return done
}

// BenchmarkReadMessage measures ReadMessage of 1 KiB messages that a raw gobwas
// peer writes in batches: on the server side (masked frames from an app) and on
// the client side (unmasked frames from upstream).
func BenchmarkReadMessage(b *testing.B) {
	const size = 1 << 10
	b.Run("server", func(b *testing.B) {
		p := newRawPair(b)
		c := wrap(b, p.server, nil, wsconn.Options{})
		benchRead(b, c, p.client, clientFrame(ws.OpBinary, true, pattern(0, size)), size)
	})
	b.Run("client", func(b *testing.B) {
		p := newRawPair(b)
		c := wrap(b, p.client, p.clientBR, wsconn.Options{Client: true})
		benchRead(b, c, p.server, ws.NewBinaryFrame(pattern(0, size)), size)
	})
}

func benchRead(b *testing.B, c *wsconn.Conn, peer net.Conn, f ws.Frame, size int) {
	const batch = 64
	one := encode(b, f)
	frames := bytes.Repeat(one, batch)
	wrote := make(chan error, 1)
	go func() { wrote <- writeFrames(peer, frames, len(one), b.N) }()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, p, err := c.ReadMessage()
		if err != nil || len(p) != size {
			b.Fatalf("ReadMessage: %d bytes, %v", len(p), err)
		}
	}
	b.StopTimer()
	if err := <-wrote; err != nil {
		b.Fatal(err)
	}
}

// writeFrames writes n copies of a frame of frameLen bytes, batch by batch.
func writeFrames(w net.Conn, batch []byte, frameLen, n int) error {
	perBatch := len(batch) / frameLen
	for n > 0 {
		k := min(n, perBatch)
		if _, err := w.Write(batch[:k*frameLen]); err != nil {
			return fmt.Errorf("write frames: %w", err)
		}
		n -= k
	}
	return nil
}
