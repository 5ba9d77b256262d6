package chaos_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// sessionID is the one session the feed serves: the app subscribes once and
// every later connection must resume it.
const sessionID = "S1"

// feed is the upstream of docs/design.md's worked example, reduced to one
// session. The first {"t":"sub"} creates the session, welcomed with seq 0;
// {"t":"resume","session":S1,"after":N} is answered with a welcome carrying
// N and the events after N from a buffer of keep events (sized by the test
// so every resume is a replay, never a snapshot); {"t":"msg","id":X} is
// recorded and answered with {"t":"ack","id":X} on the connection it came
// on, every time (the server deduplicates by id, the ack is repeated).
//
// A publisher adds an event every `every` and sends it to the live
// connection (the latest that resumed or subscribed). Replays and live
// events go out under one mutex, so a connection sees them in order.
type feed struct {
	srv  *upstreamtest.Server
	keep int

	refuseUntil atomic.Int64 // unix nanoseconds: handshakes before it get 503
	refused     atomic.Int64

	mu         sync.Mutex
	started    bool
	subscribed bool
	head       int64
	events     []string // the last keep events, the newest last
	live       *upstreamtest.Conn
	resumedOn  map[*upstreamtest.Conn]bool // connections a resume arrived on
	received   map[string]int              // msg id → times the server read it
	resumes    int
	maxReplay  int64
	anomalies  []string // protocol violations by tether

	stop chan struct{}
	done chan struct{}
}

func newFeed(t *testing.T, keep int, every time.Duration) *feed {
	t.Helper()
	f := &feed{
		keep:      keep,
		resumedOn: map[*upstreamtest.Conn]bool{},
		received:  map[string]int{},
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	srv, err := upstreamtest.NewServer(upstreamtest.Options{
		Handshake: f.handshake,
		OnConn:    f.serve,
	})
	if err != nil {
		t.Fatalf("upstreamtest.NewServer: %v", err)
	}
	f.srv = srv
	go f.publish(every)
	t.Cleanup(func() {
		f.stopPublishing()
		_ = srv.Close()
	})
	return f
}

// stopPublishing ends the publisher and waits for it; idempotent.
func (f *feed) stopPublishing() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
}

// refuseFor makes handshakes fail with 503 for d from now.
func (f *feed) refuseFor(d time.Duration) {
	f.refuseUntil.Store(time.Now().Add(d).UnixNano())
}

func (f *feed) handshake(upstreamtest.Handshake) (int, http.Header) {
	if time.Now().UnixNano() < f.refuseUntil.Load() {
		f.refused.Add(1)
		return http.StatusServiceUnavailable, nil
	}
	return 0, nil
}

type request struct {
	T       string `json:"t"`
	Session string `json:"session"`
	After   int64  `json:"after"`
	ID      string `json:"id"`
}

func (f *feed) serve(c *upstreamtest.Conn) {
	defer f.forget(c)
	for {
		_, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		var m request
		if err := json.Unmarshal(data, &m); err != nil {
			f.anomaly("unparsable message %q", data)
			continue
		}
		f.handle(c, m)
	}
}

func (f *feed) handle(c *upstreamtest.Conn, m request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m.T {
	case "sub":
		f.subscribeLocked(c)
	case "resume":
		f.resumeLocked(c, m)
	case "msg":
		f.received[m.ID]++
		_ = c.Send(`{"t":"ack","id":` + strconv.Quote(m.ID) + `}`)
	default:
		f.anomalyLocked("unexpected message type %q", m.T)
	}
}

// subscribeLocked starts the session on the first subscribe. A later
// subscribe is tether's replay after a resume on the same connection, which
// the session already has; one on a connection that did not resume first
// would lose events, so it is recorded as an anomaly. A connection that
// resumed and is no longer the live one is one tether gave up on: a
// blackhole held its subscribe, released when the fault healed, after the
// newer connection had resumed. That is stale data, not a violation.
func (f *feed) subscribeLocked(c *upstreamtest.Conn) {
	if !f.started {
		f.started = true
		_ = c.Send(welcomeMsg(0))
		f.live = c
	} else if f.live != c && !f.resumedOn[c] {
		f.anomalyLocked("subscribe on connection %d without a resume", c.N())
		f.live = c
	}
	if !f.subscribed {
		f.subscribed = true
		_ = c.Send(`{"t":"subscribed","channel":"a"}`)
	}
}

func (f *feed) resumeLocked(c *upstreamtest.Conn, m request) {
	oldest := f.head - int64(len(f.events)) + 1
	switch {
	case m.Session != sessionID || !f.started:
		f.anomalyLocked("resume of unknown session %q", m.Session)
		return
	case m.After > f.head || m.After+1 < oldest:
		f.anomalyLocked("resume after %d outside the buffer %d..%d", m.After, oldest, f.head)
		return
	}
	f.resumes++
	f.maxReplay = max(f.maxReplay, f.head-m.After)
	f.live = c
	f.resumedOn[c] = true
	_ = c.Send(welcomeMsg(m.After))
	for seq := m.After + 1; seq <= f.head; seq++ {
		_ = c.Send(f.events[seq-oldest])
	}
}

func welcomeMsg(seq int64) string {
	return fmt.Sprintf(`{"t":"welcome","session":%q,"seq":%d,"resync":false}`, sessionID, seq)
}

func eventMsg(seq int64) string {
	return `{"t":"event","channel":"a","seq":` + strconv.FormatInt(seq, 10) + `}`
}

func (f *feed) forget(c *upstreamtest.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == c {
		f.live = nil
	}
	delete(f.resumedOn, c)
}

func (f *feed) publish(every time.Duration) {
	defer close(f.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
			f.publishOne()
		}
	}
}

func (f *feed) publishOne() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started {
		return
	}
	f.head++
	ev := eventMsg(f.head)
	f.events = append(f.events, ev)
	if len(f.events) > f.keep {
		f.events = f.events[1:]
	}
	if f.live != nil {
		_ = f.live.Send(ev) // a dead connection loses it: the resume brings it back
	}
}

// takeLive removes the live connection, for a server-side close.
func (f *feed) takeLive() *upstreamtest.Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.live
	f.live = nil
	return c
}

// closeLive closes the live connection with code, as a server going away
// (1001) or restarting (1012) does. It waits for tether's close frame (at
// most the server's CloseWait), so it runs on the fault injector.
func (f *feed) closeLive(code int, reason string) bool {
	c := f.takeLive()
	if c == nil {
		return false
	}
	_ = c.CloseWith(code, reason)
	return true
}

func (f *feed) anomaly(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.anomalyLocked(format, args...)
}

func (f *feed) anomalyLocked(format string, args ...any) {
	f.anomalies = append(f.anomalies, fmt.Sprintf(format, args...))
}

// feedLedger is what the server saw, read once the soak has settled.
type feedLedger struct {
	head      int64
	received  map[string]int
	resumes   int
	maxReplay int64
	refused   int64
	anomalies []string
}

func (f *feed) ledger() feedLedger {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := make(map[string]int, len(f.received))
	for id, n := range f.received {
		rec[id] = n
	}
	return feedLedger{
		head: f.head, received: rec, resumes: f.resumes, maxReplay: f.maxReplay,
		refused: f.refused.Load(), anomalies: append([]string(nil), f.anomalies...),
	}
}

// headNow is the number of the last event published.
func (f *feed) headNow() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head
}
