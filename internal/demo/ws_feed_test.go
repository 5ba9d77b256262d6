package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// startTestFeed starts a feed at rate events/s on clock.
func startTestFeed(t *testing.T, rate int, clock func() time.Time) *wsFeed {
	t.Helper()
	f, err := startWSFeed(feedOptions{rate: rate, rng: rand.New(rand.NewPCG(1, 2)), now: clock})
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
func waitHealthy(t *testing.T, f *wsFeed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if !f.waitHealthy(ctx) {
		t.Fatal("feed never became healthy")
	}
}

// isHealthy reports whether the feed streams to a live connection now.
func isHealthy(f *wsFeed) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.up:
		return true
	default:
		return false
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

// feedWelcome is the feed's welcome.
type feedWelcome struct {
	T       string `json:"t"`
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
	Resync  bool   `json:"resync"`
	At      int64  `json:"at"`
}

func decodeWelcome(t *testing.T, msg string) feedWelcome {
	t.Helper()
	var w feedWelcome
	if err := json.Unmarshal([]byte(msg), &w); err != nil || (w.T != "welcome" && w.T != "snapshot") {
		t.Fatalf("feed sent %q, want a welcome or a snapshot", msg)
	}
	return w
}

// The first subscription starts a session: a welcome with its id and seq
// 0, the subscription's answer, then events numbered from 1.
func TestFeedWelcomeSubscribeAndNumbering(t *testing.T) {
	f := startTestFeed(t, 200, time.Now)
	p, ref := dialPeer(t, f.URL())
	if ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	p.send(ws.OpText, subMessage)
	w := decodeWelcome(t, p.text())
	if w.Session == "" || w.Seq != 0 || w.Resync {
		t.Fatalf("welcome %+v, want a session at seq 0 without resync", w)
	}
	if got := p.text(); got != `{"t":"subscribed","channel":"prices","id":1}` {
		t.Fatalf("second message = %q, want the subscription's answer", got)
	}
	for want := int64(1); want <= 10; want++ {
		e := decodeEvent(t, p.text())
		if e.Seq != want || e.Price <= 0 {
			t.Fatalf("event %+v, want seq %d with a price", e, want)
		}
	}
}

func decodeEvent(t *testing.T, msg string) event {
	t.Helper()
	e := decode(t, msg)
	if e.T != "event" {
		t.Fatalf("feed sent %q, want an event", msg)
	}
	return e
}

// dialSubscribed connects to the feed and subscribes.
func dialSubscribed(t *testing.T, f *wsFeed) *peer {
	t.Helper()
	p, ref := dialPeer(t, f.URL())
	if ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	p.send(ws.OpText, subMessage)
	return p
}

// dialResumed connects to the feed and resumes session after after.
func dialResumed(t *testing.T, f *wsFeed, session string, after int64) *peer {
	t.Helper()
	p, ref := dialPeer(t, f.URL())
	if ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	p.send(ws.OpText, fmt.Sprintf(`{"t":"resume","session":%q,"after":%d}`, session, after))
	return p
}

// sessionOf reads a's welcome and returns its session.
func sessionOf(t *testing.T, p *peer) string {
	t.Helper()
	return decodeWelcome(t, p.text()).Session
}

// A resume on a new connection is answered with a welcome at the number it
// names and the events after it, then the live stream, without a gap or a
// repeat: the session remembers its subscription.
func TestFeedResumeReplays(t *testing.T) {
	f := startTestFeed(t, 200, time.Now)
	a := dialSubscribed(t, f)
	session := sessionOf(t, a)
	last := nextEvent(t, a)
	if !f.inject(faultReset) {
		t.Fatal("reset with a live connection = false")
	}
	if f.inject(faultReset) {
		t.Error("reset without a live connection = true")
	}
	if isHealthy(f) {
		t.Fatal("feed healthy with no connection")
	}
	eventually(t, func() bool { return f.published() > last+5 }) // events to replay
	b := dialResumed(t, f, session, last)
	if w := decodeWelcome(t, b.text()); w.Session != session || w.Seq != last || w.Resync {
		t.Fatalf("welcome %+v, want session %s at %d without resync", w, session, last)
	}
	waitHealthy(t, f)
	// What the feed numbered while nothing streamed is counted, and
	// nothing more once a connection streams again.
	down := f.unstreamed()
	if down < 5 {
		t.Errorf("unstreamed = %d, want the 5 or more events numbered while no connection streamed", down)
	}
	for want := last + 1; want < last+40; want++ {
		if e := decodeEvent(t, b.text()); e.Seq != want {
			t.Fatalf("after resuming at %d: event %d, want %d", last, e.Seq, want)
		}
	}
	if st := f.Stats(); st.replayed == 0 || st.unstreamed != down {
		t.Errorf("stats %+v: nothing replayed, or unstreamed moved from %d while streaming", st, down)
	}
}

// A resume the buffer no longer reaches back to is answered with a resync
// welcome at the head and a snapshot; the stream goes on after it.
func TestFeedResumeTooFarBackGetsSnapshot(t *testing.T) {
	f, err := startWSFeed(feedOptions{rate: 200, keep: 5, rng: rand.New(rand.NewPCG(1, 2)), now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	a := dialSubscribed(t, f)
	session := sessionOf(t, a)
	for nextEvent(t, a) < 20 {
	}
	f.inject(faultReset)
	b := dialResumed(t, f, session, 1)
	w := decodeWelcome(t, b.text())
	snap := decodeWelcome(t, b.text())
	if !w.Resync || snap.T != "snapshot" || snap.At != w.Seq || w.Seq < 20 {
		t.Fatalf("answer %+v then %+v, want a resync welcome at the head and a snapshot there", w, snap)
	}
	if e := decodeEvent(t, b.text()); e.Seq != snap.At+1 {
		t.Fatalf("event %d after a snapshot at %d", e.Seq, snap.At)
	}
	if st := f.Stats(); st.snapshots != 1 {
		t.Errorf("snapshots = %d, want 1", st.snapshots)
	}
}

// A hiccup drops events on the live connection, then sends the ones before
// them again; HTTP catch-up serves the dropped ones.
func TestFeedHiccupAndCatchUp(t *testing.T) {
	f := startTestFeed(t, 200, time.Now)
	a := dialSubscribed(t, f)
	sessionOf(t, a)
	before := nextEvent(t, a)
	for before < 10 {
		before = nextEvent(t, a)
	}
	if !f.inject(faultHiccup) {
		t.Fatal("hiccup with a streaming connection = false")
	}
	seqs := []int64{before}
	for len(seqs) < 12 {
		seqs = append(seqs, nextEvent(t, a))
	}
	// Events sent before the glitch may still be arriving: the repeat is
	// where the numbers go back.
	var jump int
	for j := 1; j < len(seqs); j++ {
		if seqs[j] < seqs[j-1] {
			jump = j
			break
		}
	}
	if jump < 1 || jump+2 >= len(seqs) {
		t.Fatalf("events after the glitch %v: no repeat", seqs)
	}
	last := seqs[jump-1]
	want := []int64{last - 1, last, last + 4}
	if got := seqs[jump : jump+3]; !slices.Equal(got, want) {
		t.Fatalf("events after the glitch %v: after %d got %v, want %v (3 dropped, 2 repeated)", seqs, last, got, want)
	}
	resp, err := http.Get(f.CatchUpURL() + fmt.Sprintf("?from=%d&to=%d", last+1, last+3))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if len(lines) != 3 || decode(t, lines[0]).Seq != last+1 || decode(t, lines[2]).Seq != last+3 {
		t.Fatalf("catch-up of %d–%d answered %q", last+1, last+3, body)
	}
	if st := f.Stats(); st.dropped != 3 || st.repeated != 2 || st.served != 3 {
		t.Errorf("stats %+v, want 3 dropped, 2 repeated, 3 served", st)
	}
}

func TestFeedRestartRefusesWith502(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	f := startTestFeed(t, 100, clock.now)
	a := dialSubscribed(t, f)
	waitHealthy(t, f)
	if !f.inject(faultRestart) {
		t.Fatal("restart with a live connection = false")
	}
	if code, reason := a.closeFrame(); code != 1012 || reason != "service restart" {
		t.Errorf("close = %d %q, want 1012 service restart", code, reason)
	}
	if _, ref := dialPeer(t, f.URL()); ref == nil || ref.status != http.StatusBadGateway {
		t.Fatalf("dial during restart: refusal %+v, want 502", ref)
	}
	clock.add(restartDowntime)
	if _, ref := dialPeer(t, f.URL()); ref != nil {
		t.Fatalf("dial after restart refused: %+v", ref)
	}
}

func TestFeedOverloadRefusesWith503(t *testing.T) {
	f := startTestFeed(t, 100, time.Now)
	a := dialSubscribed(t, f)
	waitHealthy(t, f)
	if !f.inject(faultOverload) {
		t.Fatal("overload with a live connection = false")
	}
	if code, reason := a.closeFrame(); code != 1013 || reason != "try again later" {
		t.Errorf("close = %d %q, want 1013 try again later", code, reason)
	}
	for i := range overloadRefusals {
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
	if !f.inject(faultStall) {
		t.Fatal("stall with a live connection = false")
	}
	a.send(ws.OpPing, "are you there")
	b := dialSubscribed(t, f)
	if got := b.text(); got != `{"t":"subscribed","channel":"prices","id":1}` {
		t.Fatalf("new connection's first message = %q, want the subscription's answer", got)
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

// A connection that neither subscribes nor resumes gets nothing: events
// published meanwhile are only kept. Once it subscribes, the session's
// existing stream goes on (no second welcome) and the answer carries the
// request's id.
func TestFeedStreamsOnlyAfterSubscribeOrResume(t *testing.T) {
	f := startTestFeed(t, 200, time.Now)
	a := dialSubscribed(t, f)
	sessionOf(t, a)
	last := nextEvent(t, a)
	f.inject(faultReset)
	b, ref := dialPeer(t, f.URL())
	if ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	published := f.published()
	eventually(t, func() bool {
		if isHealthy(f) {
			t.Fatal("feed healthy before the new connection subscribed")
		}
		return f.published() >= published+10
	})
	b.send(ws.OpText, `{"t":"sub","channel":"prices","id":7}`)
	if got := b.text(); got != `{"t":"subscribed","channel":"prices","id":7}` {
		t.Fatalf("first message = %q, want the subscription's answer", got)
	}
	if seq := nextEvent(t, b); seq <= last+10 {
		t.Errorf("first event after subscribing again = %d, want one published after the %d kept meanwhile", seq, last+10)
	}
}
