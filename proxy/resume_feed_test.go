package proxy_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// resumeFeed is the upstream of docs/design.md's worked example: it numbers every
// event of a session and keeps the last keep of them. A connection speaks
// first: {"t":"resume","session":S,"after":N} is answered with
// {"t":"welcome","session":S,"seq":N,"resync":false} and the events after N,
// or, when the buffer no longer reaches back to N+1, with a welcome carrying
// resync:true and the head's number, then {"t":"snapshot","at":head}; any
// other first message starts a new session, welcomed with seq 0. A session
// keeps its subscriptions, so a repeated {"t":"sub"} is answered once.
//
// With greetFirst, every connection is welcomed with a fresh session as soon
// as it opens, as servers that greet on connect do; a resume then moves the
// connection to the session it names.
//
// A publisher goroutine adds one event every `every` to the session of the
// live connection (the latest that subscribed or resumed) and sends it
// there. Replays and live events go out under one mutex, so a connection
// sees them in order.
type resumeFeed struct {
	*upstreamEnv
	keep       int
	greetFirst bool
	resumes    chan resumeRecord

	mu       sync.Mutex
	sessions map[string]*feedSession
	bound    map[*upstreamtest.Conn]*feedSession
	current  *feedSession // the session events are published for
	live     *upstreamtest.Conn
	stale    []*upstreamtest.Conn // stalled, closed once superseded
	nextID   int

	stop chan struct{}
	done chan struct{}
}

// feedSession is one session's numbering and replay buffer.
type feedSession struct {
	id     string
	head   int64
	events []string // the last keep events, the newest last
	subs   map[string]bool
}

// resumeRecord is one resume the feed answered.
type resumeRecord struct {
	at     time.Time
	conn   int
	after  int64
	head   int64 // the session's last number when the resume was answered
	resync bool
}

func newResumeFeed(t *testing.T, keep int, every time.Duration, greetFirst bool) *resumeFeed {
	t.Helper()
	f := &resumeFeed{
		keep: keep, greetFirst: greetFirst,
		resumes:  make(chan resumeRecord, 1024),
		sessions: map[string]*feedSession{},
		bound:    map[*upstreamtest.Conn]*feedSession{},
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	f.upstreamEnv = newUpstream(t, upstreamConfig{
		quiet:  true,
		onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) { f.serve(c) },
	})
	go f.publish(every)
	t.Cleanup(func() {
		close(f.stop)
		<-f.done
	})
	return f
}

type feedRequest struct {
	T       string `json:"t"`
	Session string `json:"session"`
	After   int64  `json:"after"`
	Channel string `json:"channel"`
}

func (f *resumeFeed) serve(c *upstreamtest.Conn) {
	defer f.forget(c)
	if f.greetFirst {
		f.mu.Lock()
		s := f.newSessionLocked(c)
		err := c.Send(welcomeMsg(s.id, 0, false))
		f.mu.Unlock()
		if err != nil {
			return
		}
	}
	for {
		_, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		var m feedRequest
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		f.mu.Lock()
		switch m.T {
		case "resume":
			f.resumeLocked(c, m.Session, m.After)
		case "sub":
			f.subscribeLocked(c, m.Channel)
		}
		f.mu.Unlock()
	}
}

func welcomeMsg(session string, seq int64, resync bool) string {
	return fmt.Sprintf(`{"t":"welcome","session":%q,"seq":%d,"resync":%t}`, session, seq, resync)
}

func eventMsg(seq int64) string {
	return `{"t":"event","channel":"a","seq":` + strconv.FormatInt(seq, 10) + `}`
}

func (f *resumeFeed) newSessionLocked(c *upstreamtest.Conn) *feedSession {
	f.nextID++
	s := &feedSession{id: "S" + strconv.Itoa(f.nextID), subs: map[string]bool{}}
	f.sessions[s.id] = s
	f.bound[c] = s
	return s
}

// resumeLocked answers a resume with a replay, or a snapshot when the
// buffer is too small, and makes c the live connection.
func (f *resumeFeed) resumeLocked(c *upstreamtest.Conn, id string, after int64) {
	s := f.sessions[id]
	if s == nil {
		s = f.newSessionLocked(c)
		_ = c.Send(welcomeMsg(s.id, 0, true))
		return
	}
	f.bound[c] = s
	f.attachLocked(c, s)
	oldest := s.head - int64(len(s.events)) + 1
	rec := resumeRecord{at: time.Now(), conn: c.N(), after: after, head: s.head}
	if after+1 >= oldest {
		_ = c.Send(welcomeMsg(s.id, after, false))
		for seq := after + 1; seq <= s.head; seq++ {
			_ = c.Send(s.events[seq-oldest])
		}
	} else {
		rec.resync = true
		_ = c.Send(welcomeMsg(s.id, s.head, true))
		_ = c.Send(fmt.Sprintf(`{"t":"snapshot","channel":"a","at":%d}`, s.head))
	}
	f.resumes <- rec
}

// subscribeLocked starts a session for a connection that has none and
// streams its events to c.
func (f *resumeFeed) subscribeLocked(c *upstreamtest.Conn, channel string) {
	s := f.bound[c]
	if s == nil {
		s = f.newSessionLocked(c)
		_ = c.Send(welcomeMsg(s.id, 0, false))
	}
	if !s.subs[channel] {
		s.subs[channel] = true
		_ = c.Send(`{"t":"subscribed","channel":` + strconv.Quote(channel) + `}`)
	}
	f.attachLocked(c, s)
}

// attachLocked makes c the live connection of s, closing the stalled ones.
func (f *resumeFeed) attachLocked(c *upstreamtest.Conn, s *feedSession) {
	if f.live != c {
		for _, old := range f.stale {
			_ = old.Close()
		}
		f.stale = nil
	}
	f.live, f.current = c, s
}

func (f *resumeFeed) forget(c *upstreamtest.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.bound, c)
	if f.live == c {
		f.live = nil
	}
}

func (f *resumeFeed) publish(every time.Duration) {
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

// number publishes n events at once, as the publisher would; with no live
// connection (after take) they are only kept.
func (f *resumeFeed) number(n int) {
	for range n {
		f.publishOne()
	}
}

func (f *resumeFeed) publishOne() {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.current
	if s == nil {
		return
	}
	s.head++
	ev := eventMsg(s.head)
	s.events = append(s.events, ev)
	if len(s.events) > f.keep {
		s.events = s.events[1:]
	}
	if f.live != nil && f.bound[f.live] == s {
		_ = f.live.Send(ev) // a dead connection loses it: the resume brings it back
	}
}

// take removes the live connection, for a fault; head is the session's
// last number at that moment.
func (f *resumeFeed) take(t *testing.T) (c *upstreamtest.Conn, head int64) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	c = f.live
	if c == nil {
		t.Fatal("no live upstream connection to break")
	}
	f.live = nil
	return c, f.current.head
}

// feedFault is one way the feed breaks its live connection.
type feedFault struct {
	name  string
	apply func(t *testing.T, f *resumeFeed)
	// bound is the longest from the fault to the server answering the
	// resume on the next connection, from the configuration in
	// harness_test.go.
	bound time.Duration
}

var (
	faultReset = feedFault{"reset", func(t *testing.T, f *resumeFeed) {
		c, _ := f.take(t)
		_ = c.Reset()
	}, backoffCap + slack}
	faultStall = feedFault{"half-open", func(t *testing.T, f *resumeFeed) {
		c, _ := f.take(t)
		f.mu.Lock()
		f.stale = append(f.stale, c)
		f.mu.Unlock()
		c.IgnorePings(true)
		c.Stall()
		// Two heartbeat cycles: the verdict is put off while tether's own
		// wake-ups come late (checkHeartbeat).
	}, 2*(pingInterval+pingTimeout) + backoffCap + slack}
	faultRestart = feedFault{"restart 1012", func(t *testing.T, f *resumeFeed) {
		c, _ := f.take(t)
		_ = c.CloseWith(1012, "service restart")
	}, restartFloor + backoffCap + slack}
)

// nextResume returns the next resume the feed answered.
func (f *resumeFeed) nextResume(t *testing.T) resumeRecord {
	t.Helper()
	select {
	case r := <-f.resumes:
		return r
	case <-time.After(testTimeout):
		t.Fatalf("no resume within %v", testTimeout)
		return resumeRecord{}
	}
}

// seqView checks what the app of a resume feed sees: one welcome, never a
// resync welcome, events numbered consecutively from 1 with no duplicate,
// and after a snapshot at M, M+1.
type seqView struct {
	last      int64
	welcomes  int
	snapshots int
}

type feedMessage struct {
	T      string `json:"t"`
	Seq    int64  `json:"seq"`
	At     int64  `json:"at"`
	Resync bool   `json:"resync"`
	From   int64  `json:"from"`
	To     int64  `json:"to"`
}

// until reads the app's messages until it has seen event n.
func (v *seqView) until(t *testing.T, a *app, n int64) {
	t.Helper()
	for v.last < n {
		v.take(t, a)
	}
}

func (v *seqView) take(t *testing.T, a *app) {
	t.Helper()
	raw := a.next(t).data
	var m feedMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("app got %q: %v", raw, err)
	}
	switch m.T {
	case "welcome":
		v.welcomes++
		if v.welcomes > 1 || m.Resync {
			t.Fatalf("app got welcome #%d %s: it must see exactly one, never a resync", v.welcomes, raw)
		}
	case "snapshot":
		v.snapshots++
		v.last = m.At
	case "event":
		if m.Seq != v.last+1 {
			t.Fatalf("app got event %d after %d: gap or duplicate", m.Seq, v.last)
		}
		v.last = m.Seq
	case "subscribed":
	default:
		t.Fatalf("app got unexpected %s", raw)
	}
}
