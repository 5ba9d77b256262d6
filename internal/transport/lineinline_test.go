//go:build unix

package transport

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// A line queued for an idle writer is written by the goroutine that queued
// it, as wsconn's frames are: when Send returns, nothing is counted as
// queued and the app reads the line. Each round is a burst of its own: the
// app reads the line before the next is sent. Waking the writer goroutine
// instead woke another thread per burst.
func TestLineWrittenInline(t *testing.T) {
	c, client, _ := newTestLineConn(t, LineOptions{})
	_ = client.SetReadDeadline(time.Now().Add(lineTimeout))
	r := bufio.NewReader(client)
	for i := range 50 {
		want := fmt.Sprintf("line %d", i)
		if err := c.Send(context.Background(), ws.OpText, []byte(want)); err != nil {
			t.Fatal(err)
		}
		if q := c.Queued(); q != 0 {
			t.Fatalf("round %d: %d bytes still queued when Send returned, want them written by it", i, q)
		}
		got, err := r.ReadString('\n')
		if err != nil || got != want+"\n" {
			t.Fatalf("round %d: read %q, %v; want %q", i, got, err, want+"\n")
		}
	}
}

// An app that stops reading: Send writes what the socket takes and
// returns, never waiting for the app, and the rest (the remainder of a
// partial write, the lines behind it) goes out through the writer
// goroutine once the app reads again, whole and in order; then the queue's
// count is back to zero.
func TestLineInlineLeavesRestToWriter(t *testing.T) {
	c, client, _ := newTestLineConn(t, LineOptions{QueueBytes: 8 << 20, CloseWait: lineTimeout})
	// A small send buffer: some hundreds of KiB go before the app reads.
	// (The app's receive buffer stays as it is: one set small stalls TCP
	// on zero-window probes, 200 ms and more each.)
	if err := c.nc.(*net.TCPConn).SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	lines := []string{strings.Repeat("a", 1<<20), "b", strings.Repeat("c", 300<<10)}
	for _, l := range lines {
		// A Send that waited for the app would wait for ever: this
		// goroutine is the app.
		if err := c.Send(context.Background(), ws.OpText, []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if c.Queued() == 0 {
		t.Fatal("nothing queued behind an app that does not read: the sizes no longer test a partial write")
	}
	_ = client.SetReadDeadline(time.Now().Add(lineTimeout))
	r := bufio.NewReaderSize(client, 64<<10)
	for i, want := range lines {
		got, err := r.ReadString('\n')
		if err != nil || got != want+"\n" {
			t.Fatalf("line %d: read %d bytes, %v; want %d", i, len(got), err, len(want)+1)
		}
	}
	// The writer frees the bytes just after its write returns, which may
	// be after the app read them: poll, bounded.
	for deadline := time.Now().Add(lineTimeout); c.Queued() != 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("Queued() = %d with every line read, want 0", c.Queued())
		}
	}
}
