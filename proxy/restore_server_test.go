package proxy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// protoServer is an upstream that, like a real one, remembers nothing
// across connections: login and subscriptions belong to the socket and are
// forgotten on every new one. It speaks two dialects at once:
//
//   - docs/design.md's worked example: {"t":"sub","channel":c}, {"t":"unsub",…},
//     {"t":"msg","id":x} answered by {"t":"ack","id":x};
//   - Binance style: {"method":"SUBSCRIBE","params":[c],"id":n} answered by
//     {"result":null,"id":n}, and a login {"op":"login","id":n} answered by
//     {"op":"login","ok":true,"id":n}.
//
// {"t":"probe","n":k} makes it send {"t":"event","channel":c,"probe":k} for
// every channel subscribed on that socket, in name order, then
// {"t":"probed","n":k}: since tether sends app messages after everything a
// restore replays, a probe shows exactly what the restore left subscribed.
// What tether must never do is recorded as a violation: subscribing before
// the login was answered (when login is required), unsubscribing a channel
// not subscribed on that socket.
type protoServer struct {
	*upstreamEnv
	opts protoOptions

	mu         sync.Mutex
	conns      map[int]*protoConn
	received   map[string]int // message ids (msg "id") read, over all sockets
	violations []string
}

type protoOptions struct {
	welcome string                         // greeting on every socket
	refuse  func(n int) (int, http.Header) // handshake answers, as upstreamConfig.refuse
	quiet   bool                           // no per-socket log lines
	// login requires a login before subscriptions. The answer comes
	// loginDelay after the login, while the socket goes on reading (a
	// subscription arriving meanwhile is a violation); holdLogin, when it
	// returns a channel for the socket, delays the answer until a value
	// arrives on it instead; answerLogin false means no answer at all.
	login       bool
	loginDelay  time.Duration
	holdLogin   func(conn int) <-chan struct{}
	answerLogin func(conn int) bool
	// dropAck: the first delivery of these msg ids is not acknowledged,
	// as if the ack were lost; dupAck: these are acknowledged twice.
	dropAck map[string]bool
	dupAck  map[string]bool
}

// protoConn is one socket's state.
type protoConn struct {
	c        *upstreamtest.Conn
	loggedIn bool
	subs     map[string]bool
	log      []string // every message read, in order
}

func newProtoServer(t *testing.T, opts protoOptions) *protoServer {
	t.Helper()
	p := &protoServer{opts: opts, conns: map[int]*protoConn{}, received: map[string]int{}}
	p.upstreamEnv = newUpstream(t, upstreamConfig{
		greeting: opts.welcome,
		refuse:   opts.refuse,
		quiet:    opts.quiet,
		onConn:   func(_ *upstreamEnv, c *upstreamtest.Conn) { p.serve(c) },
	})
	return p
}

// protoMsg is the union of both dialects' fields.
type protoMsg struct {
	T       string          `json:"t"`
	Op      string          `json:"op"`
	Method  string          `json:"method"`
	Channel string          `json:"channel"`
	Params  []string        `json:"params"`
	ID      json.RawMessage `json:"id"`
	N       int             `json:"n"`
}

func (p *protoServer) serve(c *upstreamtest.Conn) {
	pc := &protoConn{c: c, subs: map[string]bool{}}
	p.mu.Lock()
	p.conns[c.N()] = pc
	p.mu.Unlock()
	var answers sync.WaitGroup // login answers in flight
	defer answers.Wait()
	for {
		_, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		var m protoMsg
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if m.Op == "login" {
			answers.Add(1)
			go func() { defer answers.Done(); p.login(pc, m) }()
			continue
		}
		for _, out := range p.handle(pc, m, string(data)) {
			if c.Send(out) != nil {
				return
			}
		}
	}
}

// handle applies one message to the socket's state and returns the replies.
func (p *protoServer) handle(pc *protoConn, m protoMsg, raw string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc.log = append(pc.log, raw)
	switch {
	case m.T == "sub" || m.Method == "SUBSCRIBE":
		return p.subscribe(pc, m, true)
	case m.T == "unsub" || m.Method == "UNSUBSCRIBE":
		return p.subscribe(pc, m, false)
	case m.T == "msg":
		return p.message(m)
	case m.T == "probe":
		return p.probe(pc, m.N)
	}
	return nil
}

// login answers a login on its own goroutine, as a server that checks
// credentials elsewhere does, while the socket goes on reading.
func (p *protoServer) login(pc *protoConn, m protoMsg) {
	n := pc.c.N()
	p.mu.Lock()
	pc.log = append(pc.log, "login")
	answer := p.opts.answerLogin == nil || p.opts.answerLogin(n)
	p.mu.Unlock()
	if !answer {
		return
	}
	var hold <-chan struct{}
	if p.opts.holdLogin != nil {
		hold = p.opts.holdLogin(n)
	}
	var delay <-chan time.Time
	if hold == nil {
		t := time.NewTimer(p.opts.loginDelay)
		defer t.Stop()
		delay = t.C
	}
	select {
	case <-hold:
	case <-delay:
	case <-pc.c.Done():
		return
	}
	p.mu.Lock()
	pc.loggedIn = true
	p.mu.Unlock()
	_ = pc.c.Send(fmt.Sprintf(`{"op":"login","ok":true,"id":%s}`, orNull(m.ID)))
}

func (p *protoServer) subscribe(pc *protoConn, m protoMsg, on bool) []string {
	channels := m.Params
	if m.Channel != "" {
		channels = []string{m.Channel}
	}
	if p.opts.login && !pc.loggedIn {
		p.violations = append(p.violations, fmt.Sprintf("conn %d: %v before the login was answered", pc.c.N(), channels))
		return []string{`{"t":"error","reason":"log in first"}`}
	}
	for _, ch := range channels {
		if !on && !pc.subs[ch] {
			p.violations = append(p.violations, fmt.Sprintf("conn %d: unsubscribe %s, not subscribed on this socket", pc.c.N(), ch))
		}
		pc.subs[ch] = on
		if !on {
			delete(pc.subs, ch)
		}
	}
	if len(m.ID) > 0 {
		return []string{fmt.Sprintf(`{"result":null,"id":%s}`, m.ID)}
	}
	return nil
}

func (p *protoServer) message(m protoMsg) []string {
	var id string
	if json.Unmarshal(m.ID, &id) != nil {
		return nil
	}
	p.received[id]++
	if p.opts.dropAck[id] && p.received[id] == 1 {
		return nil
	}
	ack := fmt.Sprintf(`{"t":"ack","id":%q}`, id)
	if p.opts.dupAck[id] {
		return []string{ack, ack}
	}
	return []string{ack}
}

func (p *protoServer) probe(pc *protoConn, n int) []string {
	var out []string
	for _, ch := range sortedKeys(pc.subs) {
		out = append(out, fmt.Sprintf(`{"t":"event","channel":%q,"probe":%d}`, ch, n))
	}
	return append(out, fmt.Sprintf(`{"t":"probed","n":%d}`, n))
}

func orNull(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	return string(raw)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// connLog returns what socket n read, in order ("login" for a login).
func (p *protoServer) connLog(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc := p.conns[n]; pc != nil {
		return slices.Clone(pc.log)
	}
	return nil
}

func (p *protoServer) receivedCount(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.received[id]
}

// expectNoViolations fails the test with everything tether did wrong.
func (p *protoServer) expectNoViolations(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range p.violations {
		t.Errorf("upstream saw: %s", v)
	}
}

// ---- the app's side ----

// tally counts what the app received besides probe results.
type tally struct {
	welcomes int
	logins   int            // login replies
	replies  map[string]int // request id → {"result":…} replies
	acks     map[string]int // msg id → acks
	other    []string
}

func newTally() *tally { return &tally{replies: map[string]int{}, acks: map[string]int{}} }

// appEvent is the app-side view of one message.
type appEvent struct {
	T       string          `json:"t"`
	Op      string          `json:"op"`
	Channel string          `json:"channel"`
	Probe   int             `json:"probe"`
	N       int             `json:"n"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
}

// probe sends probe k and returns the channels whose events came back.
// Everything else the app receives meanwhile is tallied.
func (tl *tally) probe(t *testing.T, a *app, k int) []string {
	t.Helper()
	a.sendText(t, fmt.Sprintf(`{"t":"probe","n":%d}`, k))
	var got []string
	for {
		m := a.next(t)
		var ev appEvent
		if err := json.Unmarshal(m.data, &ev); err != nil {
			t.Fatalf("app got %q: %v", m.data, err)
		}
		switch {
		case ev.T == "probed" && ev.N == k:
			return got
		case ev.T == "event" && ev.Probe == k:
			got = append(got, ev.Channel)
		case ev.T == "event":
			t.Fatalf("app got an event of probe %d while waiting for probe %d", ev.Probe, k)
		default:
			tl.add(ev, string(m.data))
		}
	}
}

// until reads and tallies the app's messages until done reports true.
func (tl *tally) until(t *testing.T, a *app, what string, done func() bool) {
	t.Helper()
	for !done() {
		m := a.next(t)
		var ev appEvent
		if err := json.Unmarshal(m.data, &ev); err != nil || ev.T == "event" || ev.T == "probed" {
			t.Fatalf("app got %q while waiting for %s", m.data, what)
		}
		tl.add(ev, string(m.data))
	}
}

func (tl *tally) add(ev appEvent, raw string) {
	switch {
	case ev.T == "welcome":
		tl.welcomes++
	case ev.Op == "login":
		tl.logins++
	case ev.T == "ack":
		var id string
		_ = json.Unmarshal(ev.ID, &id)
		tl.acks[id]++
	case len(ev.Result) > 0:
		tl.replies[string(ev.ID)]++
	default:
		tl.other = append(tl.other, raw)
	}
}

// expectChannels fails unless probe k shows exactly want subscribed.
func (tl *tally) expectChannels(t *testing.T, a *app, k int, want ...string) {
	t.Helper()
	sort.Strings(want)
	if got := tl.probe(t, a, k); !slices.Equal(got, want) {
		t.Fatalf("probe %d: events for %v, want exactly %v", k, got, want)
	}
}

// fault is one way the upstream socket dies; after it, tether must reconnect.
type fault struct {
	name string
	kill func(c *upstreamtest.Conn)
}

var restoreFaults = []fault{
	{"reset", func(c *upstreamtest.Conn) { _ = c.Reset() }},
	{"half-open stall", func(c *upstreamtest.Conn) { c.IgnorePings(true); c.Stall() }},
	{"close 1012", func(c *upstreamtest.Conn) { _ = c.CloseWith(1012, "restarting") }},
}

func msgText(id string) string { return `{"t":"msg","id":` + strconv.Quote(id) + `}` }
