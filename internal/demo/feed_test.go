package demo

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// startTestFeed starts a feed at rate events/s on clock.
func startTestFeed(t *testing.T, rate int, clock func() time.Time) *feed {
	t.Helper()
	f, err := startFeed(feedOptions{rate: rate, rng: rand.New(rand.NewPCG(1, 2)), now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

type event struct {
	T       string  `json:"t"`
	Seq     int64   `json:"seq"`
	Price   float64 `json:"price"`
	Channel string  `json:"channel"`
}

func decode(t *testing.T, msg string) event {
	t.Helper()
	var e event
	if err := json.Unmarshal([]byte(msg), &e); err != nil {
		t.Fatalf("feed sent %q: %v", msg, err)
	}
	return e
}

// waitHealthy waits until the feed streams to a subscribed connection.
func waitHealthy(t *testing.T, f *feed) {
	t.Helper()
	select {
	case <-f.healthy():
	case <-time.After(testTimeout):
		t.Fatal("feed never became healthy")
	}
}

// nextEvent reads messages until an event and returns its number.
func nextEvent(t *testing.T, p *peer) int64 {
	t.Helper()
	for {
		if e := decode(t, p.text()); e.T == "event" {
			return e.Seq
		}
	}
}

func TestFeedHelloSubscribeAndNumbering(t *testing.T) {
	f := startTestFeed(t, 200, time.Now)
	p, ref := dialPeer(t, f.URL())
	if ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	if got := p.text(); got != helloMessage {
		t.Fatalf("first message = %q, want the hello", got)
	}
	p.send(ws.OpText, subMessage)
	var want int64 = 1
	subscribed := false
	for want <= 10 || !subscribed {
		e := decode(t, p.text())
		switch e.T {
		case "subscribed":
			subscribed = e.Channel == "prices"
		case "event":
			if e.Seq != want || e.Price <= 0 {
				t.Fatalf("event %+v, want seq %d with a price", e, want)
			}
			want++
		}
	}
}

// dialSubscribed connects to the feed and subscribes.
func dialSubscribed(t *testing.T, f *feed) *peer {
	t.Helper()
	p, ref := dialPeer(t, f.URL())
	if ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	p.send(ws.OpText, subMessage)
	return p
}

func TestFeedResetLeavesAGap(t *testing.T) {
	f := startTestFeed(t, 200, time.Now)
	a := dialSubscribed(t, f)
	last := nextEvent(t, a)
	if !f.reset() {
		t.Fatal("reset() with a live connection = false")
	}
	if f.reset() {
		t.Error("reset() without a live connection = true")
	}
	for {
		if _, err := a.frame(); err != nil {
			break // the RST, after whatever was in flight
		}
	}
	select {
	case <-f.healthy():
		t.Fatal("feed healthy with no connection")
	default:
	}
	b := dialSubscribed(t, f)
	if got := b.text(); got != helloMessage {
		t.Fatalf("first message after reconnect = %q", got)
	}
	waitHealthy(t, f)
	if seq := nextEvent(t, b); seq <= last {
		t.Errorf("numbering restarted: %d after %d; the counter is global", seq, last)
	}
}

func TestFeedRestartRefusesWith502(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	f := startTestFeed(t, 100, clock.now)
	a := dialSubscribed(t, f)
	waitHealthy(t, f)
	applied := make(chan bool, 1)
	go func() { applied <- f.restart(time.Minute) }() // returns after our close echo
	if code, reason := a.closeFrame(); code != 1012 || reason != "service restart" {
		t.Errorf("close = %d %q, want 1012 service restart", code, reason)
	}
	if !<-applied {
		t.Fatal("restart() = false")
	}
	if _, ref := dialPeer(t, f.URL()); ref == nil || ref.status != http.StatusBadGateway {
		t.Fatalf("dial during restart: refusal %+v, want 502", ref)
	}
	clock.add(time.Minute)
	if _, ref := dialPeer(t, f.URL()); ref != nil {
		t.Fatalf("dial after restart refused: %+v", ref)
	}
}

func TestFeedOverloadRefusesWith503(t *testing.T) {
	f := startTestFeed(t, 100, time.Now)
	a := dialSubscribed(t, f)
	waitHealthy(t, f)
	applied := make(chan bool, 1)
	go func() { applied <- f.overload(2) }()
	if code, reason := a.closeFrame(); code != 1013 || reason != "try again later" {
		t.Errorf("close = %d %q, want 1013 try again later", code, reason)
	}
	if !<-applied {
		t.Fatal("overload() = false")
	}
	for i := range 2 {
		if _, ref := dialPeer(t, f.URL()); ref == nil || ref.status != http.StatusServiceUnavailable || ref.retryAfter != "1" {
			t.Fatalf("dial %d during overload: refusal %+v, want 503 with Retry-After 1", i+1, ref)
		}
	}
	if _, ref := dialPeer(t, f.URL()); ref != nil {
		t.Fatalf("third dial refused: %+v", ref)
	}
}

func TestFeedStallIsHalfOpenUntilSuperseded(t *testing.T) {
	f := startTestFeed(t, 100, time.Now)
	a := dialSubscribed(t, f)
	nextEvent(t, a)
	if !f.stall() {
		t.Fatal("stall() = false")
	}
	a.send(ws.OpPing, "are you there")
	b := dialSubscribed(t, f)
	if got := b.text(); got != helloMessage {
		t.Fatalf("new connection's first message = %q", got)
	}
	// The new connection supersedes the stalled one, which the feed then
	// closes without ever having read the ping.
	for {
		fr, err := a.frame()
		if err != nil {
			break
		}
		if fr.Header.OpCode == ws.OpPong {
			t.Fatal("stalled connection answered a ping")
		}
	}
	nextEvent(t, b)
}

// Subscriptions belong to the connection: a new one gets its hello and no
// event until it subscribes, and the subscription's answer carries the
// request's id.
func TestFeedForgetsSubscriptions(t *testing.T) {
	f := startTestFeed(t, 200, time.Now)
	a := dialSubscribed(t, f)
	nextEvent(t, a)
	f.reset()
	b, ref := dialPeer(t, f.URL())
	if ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	if got := b.text(); got != helloMessage {
		t.Fatalf("first message = %q, want the hello", got)
	}
	// Let events come due while b has not subscribed: none may reach it.
	published := f.Stats().published
	deadline := time.Now().Add(testTimeout)
	for f.Stats().published < published+10 {
		if time.Now().After(deadline) {
			t.Fatal("the feed stopped numbering events")
		}
		select {
		case <-f.healthy():
			t.Fatal("feed healthy before the new connection subscribed")
		case <-time.After(5 * time.Millisecond):
		}
	}
	b.send(ws.OpText, `{"t":"sub","channel":"prices","id":7}`)
	if got := b.text(); got != `{"t":"subscribed","channel":"prices","id":7}` {
		t.Fatalf("first message after the hello = %q, want the subscription's answer", got)
	}
	nextEvent(t, b)
}

func TestFeedDue(t *testing.T) {
	clock := &manualClock{t: t0}
	f := &feed{opts: feedOptions{rate: 20, now: clock.now}}
	if from, to, _ := f.due(); from <= to {
		t.Fatalf("due before any connection = %d..%d, want nothing", from, to)
	}
	f.started, f.epoch = true, t0
	steps := []struct {
		advance  time.Duration
		from, to int64
	}{
		{50 * time.Millisecond, 1, 1},
		{10 * time.Millisecond, 2, 1},   // nothing due yet
		{940 * time.Millisecond, 2, 20}, // a late tick catches up
		{10 * time.Second, 21, 40},      // a long stall: one second's worth
		{50 * time.Millisecond, 41, 41}, // and the schedule moved on
	}
	for i, s := range steps {
		clock.add(s.advance)
		if from, to, _ := f.due(); from != s.from || to != s.to {
			t.Errorf("step %d: due = %d..%d, want %d..%d", i, from, to, s.from, s.to)
		}
	}
}
