package upstream_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

func newBudget(t *testing.T, limit, share int64) *budget.Budget {
	t.Helper()
	b, err := budget.New(budget.Options{Limit: limit, Share: share, Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// awaitUsed polls the budget until it holds want bytes, within waitLimit:
// a lost connection's writer gives its queue back when it ends, which the
// Client does not wait for before it reports the loss.
func awaitUsed(t *testing.T, b *budget.Budget, want int64, what string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitLimit)
	for b.Used() != want {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: the budget holds %d bytes, want %d", what, b.Used(), want)
		}
	}
}

// awaitBlocked polls until a Send waits for the budget with the account
// past limit-size: the queue is full and stays so, the upstream reading
// nothing. Bounded by waitLimit.
func awaitBlocked(t *testing.T, b *budget.Budget, limit, size int64, what string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitLimit)
	for b.Waiting() != 1 || b.Used() <= limit-size {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: %d sessions wait with %d bytes used, want 1 waiting beyond %d", what, b.Waiting(), b.Used(), limit-size)
		}
	}
}

// TestLostConnectionGivesQueueBack: an upstream that stops reading lets
// tether's write queue fill until its Sends wait for the memory budget,
// then dies (TCP reset), three times over on one Client, as a session's
// upstream does. Each time, what the lost connection never wrote goes back
// to the session's budget account: the budget is at zero again before the
// next connection queues anything, where the bytes of each lost queue
// would otherwise pile up.
func TestLostConnectionGivesQueueBack(t *testing.T) {
	const rounds, limit, size = 3, 64 << 10, 1 << 10
	b := newBudget(t, limit, 16<<10) // the queue reaches into the pool, and the budget bounds it
	acct := b.Open()
	conns := make(chan *upstreamtest.Conn, rounds+1)
	srv := newServer(t, upstreamtest.Options{InboxMessages: 1, ReceiveBuffer: 16 << 10, OnConn: func(c *upstreamtest.Conn) {
		c.Stall() // reads nothing from now on
		conns <- c
		holdOpen(c)
	}})
	proceed := make(chan struct{}, rounds+1)
	h := newHandler()
	h.restore = func(ctx context.Context, c *upstream.Conn) error {
		// Each connection fills its queue only once the test has seen the
		// previous one's bytes come back.
		select {
		case <-proceed:
		case <-ctx.Done():
			return ctx.Err()
		}
		msg := make([]byte, size)
		for {
			if err := c.Send(ctx, ws.OpBinary, msg); err != nil {
				return err // the connection is lost
			}
		}
	}
	opts := testOptions(t, srv.URL(), h)
	opts.Account = acct
	startClient(t, opts)

	for round := range rounds {
		proceed <- struct{}{}
		awaitBlocked(t, b, limit, size, "a full write queue")
		held := b.Used()
		c := recv(t, conns, "the upstream's connection")
		_ = c.Reset()
		h.nextLost(t)
		awaitUsed(t, b, 0, "after the connection was lost")
		t.Logf("round %d: %d bytes queued when the upstream died, 0 after", round, held)
	}
}

// TestReassemblyCounts: an upstream message in fragments counts on the
// account while it is being reassembled, and no longer once the Handler
// has it whole. The upstream is a raw gobwas server, to send the fragments
// one at a time.
func TestReassemblyCounts(t *testing.T) {
	const part, parts = 64 << 10, 4
	b := newBudget(t, 4<<20, 16<<10)
	acct := b.Open()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rest := make(chan struct{})
	served := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-served })
	go func() {
		defer close(served)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if _, err := ws.Upgrade(nc); err != nil {
			return
		}
		for i := range parts - 1 {
			op := ws.OpContinuation
			if i == 0 {
				op = ws.OpBinary
			}
			if ws.WriteFrame(nc, ws.NewFrame(op, false, make([]byte, part))) != nil {
				return
			}
		}
		<-rest
		if ws.WriteFrame(nc, ws.NewFrame(ws.OpContinuation, true, make([]byte, part))) != nil {
			return
		}
		_, _ = io.Copy(io.Discard, nc) // until the client closes
	}()
	held := make(chan int64, 1)
	h := newHandler()
	h.message = func(_ *upstream.Conn, _ ws.OpCode, data []byte) { held <- acct.Held() }
	opts := testOptions(t, "ws://"+ln.Addr().String()+"/", h)
	opts.Account = acct
	c := startClient(t, opts)

	awaitUsed(t, b, (parts-1)*part, "the first fragments read")
	close(rest)
	if got := recv(t, held, "the whole message"); got != 0 {
		t.Fatalf("the account holds %d bytes while the Handler has the message, want 0", got)
	}
	c.Close()
}

// TestSSEEventCounts: an SSE event a server sends slowly counts on the
// account while it is parsed, a line spanning reads and data lines before
// their blank line alike, and no longer once the Handler has it; a stream
// cut in the middle of an event gives its bytes back. The server is a raw
// socket, to send the event in pieces and to reset the connection.
func TestSSEEventCounts(t *testing.T) {
	const big, cut = 100 << 10, 50 << 10
	b := newBudget(t, 4<<20, 16<<10)
	acct := b.Open()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan *net.TCPConn, 4)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- nc.(*net.TCPConn)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for nc := range conns {
			_ = nc.Close()
		}
	})
	held := make(chan int64, 1)
	h := newHandler()
	h.message = func(_ *upstream.Conn, _ ws.OpCode, data []byte) { held <- acct.Held() }
	opts := sseOptions(t, "http://"+ln.Addr().String()+"/events", h)
	opts.Account = acct
	c := startClient(t, opts)

	nc := recv(t, conns, "the client's request")
	// The request is read to its end before the answer, as a server does.
	if _, err := http.ReadRequest(bufio.NewReader(nc)); err != nil {
		t.Fatal(err)
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(nc, s); err != nil {
			t.Fatal(err)
		}
	}
	send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n")
	line := "data: " + strings.Repeat("x", big)
	send(line)
	awaitUsed(t, b, int64(len(line)), "a data line without its end")
	send("\n")
	awaitUsed(t, b, big+1, "an event without its blank line")
	send("\n")
	if got := recv(t, held, "the whole event"); got != 0 {
		t.Fatalf("the account holds %d bytes while the Handler has the event, want 0", got)
	}
	send("data: " + strings.Repeat("y", cut) + "\n")
	awaitUsed(t, b, cut+1, "the next event, cut short")
	_ = nc.SetLinger(0)
	_ = nc.Close()
	awaitUsed(t, b, 0, "after the stream was reset")
	c.Close()
}
