package proxy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/gapfill"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/template"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// feedKey is the credential the channel feed's WebSocket and its catch-up
// endpoint both require.
const feedKey = "k-123"

func chanEvent(channel string, seq int64) string {
	return fmt.Sprintf(`{"t":"event","channel":%q,"seq":%d}`, channel, seq)
}

// channelFeed numbers events per channel, like an exchange feed without a
// resume protocol: subscriptions belong to the connection, events published
// while no connection has subscribed a channel are lost to it, and the
// history of every channel is served over HTTP (/catchup?channel=c&from=F&to=T,
// NDJSON) to clients sending the feed's key.
type channelFeed struct {
	*upstreamEnv
	http       *httptest.Server
	subscribed chan string       // channels as connections subscribe them
	late       map[string]string // an event held back by publishFaulty, per channel

	mu       sync.Mutex
	history  map[string][]string // channel → events, seq 1 first
	subs     map[string]*upstreamtest.Conn
	requests []string // catch-up queries, in order
	badKeys  int      // catch-up requests without the key
}

func newChannelFeed(t *testing.T) *channelFeed {
	t.Helper()
	f := &channelFeed{
		subscribed: make(chan string, 256),
		late:       map[string]string{},
		history:    map[string][]string{},
		subs:       map[string]*upstreamtest.Conn{},
	}
	f.upstreamEnv = newUpstream(t, upstreamConfig{
		quiet:  true,
		onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) { f.serve(c) },
	})
	f.http = httptest.NewServer(http.HandlerFunc(f.catchUp))
	t.Cleanup(f.http.Close)
	return f
}

func (f *channelFeed) serve(c *upstreamtest.Conn) {
	for {
		_, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		var m feedRequest
		if json.Unmarshal(data, &m) != nil || m.T != "sub" {
			continue
		}
		f.mu.Lock()
		f.subs[m.Channel] = c
		f.mu.Unlock()
		_ = c.Send(`{"t":"subscribed","channel":` + strconv.Quote(m.Channel) + `}`)
		f.subscribed <- m.Channel
	}
}

// catchUp serves the history of a channel between from and to.
func (f *channelFeed) catchUp(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, _ := strconv.ParseInt(q.Get("from"), 10, 64)
	to, _ := strconv.ParseInt(q.Get("to"), 10, 64)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.URL.RawQuery)
	if r.Header.Get("X-Feed-Key") != feedKey {
		f.badKeys++
		http.Error(w, "no key", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	h := f.history[q.Get("channel")]
	for seq := max(from, 1); seq <= min(to, int64(len(h))); seq++ {
		fmt.Fprintln(w, h[seq-1])
	}
}

// number records the next event of channel and returns it.
func (f *channelFeed) number(channel string) (int64, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq := int64(len(f.history[channel]) + 1)
	ev := chanEvent(channel, seq)
	f.history[channel] = append(f.history[channel], ev)
	return seq, ev
}

// send writes an event to the connection that subscribed its channel, if
// any: without one, it is lost like any event published during an outage.
func (f *channelFeed) send(channel, ev string) {
	f.mu.Lock()
	c := f.subs[channel]
	f.mu.Unlock()
	if c != nil {
		_ = c.Send(ev)
	}
}

// reset breaks the connection serving the channels.
func (f *channelFeed) reset() {
	f.mu.Lock()
	conns := map[*upstreamtest.Conn]bool{}
	for ch, c := range f.subs {
		conns[c] = true
		delete(f.subs, ch)
	}
	f.mu.Unlock()
	for c := range conns {
		_ = c.Reset()
	}
}

func (f *channelFeed) awaitSubscribed(t *testing.T, channels ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, ch := range channels {
		want[ch] = true
	}
	for len(want) > 0 {
		select {
		case ch := <-f.subscribed:
			delete(want, ch)
		case <-time.After(testTimeout):
			t.Fatalf("channels %v not subscribed again within %v", want, testTimeout)
		}
	}
}

func mustGapFillURL(t *testing.T, text string) template.GapFillURL {
	t.Helper()
	var u template.GapFillURL
	if err := u.UnmarshalText([]byte(text)); err != nil {
		t.Fatalf("gapfill url %q: %v", text, err)
	}
	return u
}

// newGapFill returns a catch-up client with the upstream's headers, as
// cmd/tether builds it, closed at cleanup.
func newGapFill(t *testing.T, header http.Header, timeout time.Duration) *gapfill.Client {
	c := gapfill.NewClient(gapfill.Options{Header: header, Timeout: timeout})
	t.Cleanup(c.Close)
	return c
}

// channelRules sequences per channel and fills gaps over HTTP, with no
// resume: docs/design.md's gap filling for a feed without a resume protocol.
func channelRules(t *testing.T, m proxy.Metrics, catchUpURL string) func(*proxy.Options) {
	return func(o *proxy.Options) {
		header := http.Header{"X-Feed-Key": {feedKey}}
		o.Metrics = m
		o.Upstream.Header = header
		o.Rules.SubscribeMatch = mustMatch(t, `{"t":"sub"}`)
		o.Rules.SubscriptionKey = mustPath(t, "channel")
		o.Rules.SeqPath = mustPath(t, "seq")
		o.Rules.StreamPath = mustPath(t, "channel")
		o.Sequences = proxy.Sequences{
			GapFillURL: mustGapFillURL(t, catchUpURL+`/catchup?channel={{query .Stream}}&from={{.From}}&to={{.To}}`),
			GapFill:    newGapFill(t, header, 0),
			GapTimeout: 2 * time.Second,
		}
	}
}

// channelView checks that the app sees, per channel, 1, 2, 3… once each.
type channelView map[string]int64

func (v channelView) take(t *testing.T, a *app) {
	t.Helper()
	raw := a.next(t).data
	var m struct {
		T, Channel string
		Seq        int64
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("app got %q: %v", raw, err)
	}
	switch m.T {
	case "subscribed":
	case "event":
		if m.Seq != v[m.Channel]+1 {
			t.Fatalf("app got %s after %d: gap, duplicate or disorder", raw, v[m.Channel])
		}
		v[m.Channel] = m.Seq
	default:
		t.Fatalf("app got unexpected %s", raw)
	}
}

func (v channelView) until(t *testing.T, a *app, n int64, channels ...string) {
	t.Helper()
	for _, ch := range channels {
		for v[ch] < n {
			v.take(t, a)
		}
	}
}

// A per-channel feed without resume, which drops numbers on a live
// connection, sends some twice, swaps neighbours and loses what it
// publishes while tether reconnects: HTTP catch-up with the upstream's
// credentials repairs everything, and the app sees 1..N per channel
// exactly once, in order.
func TestChannelFeedRepairedOverHTTP(t *testing.T) {
	const n = 200
	channels := []string{"a", "b", "c"}
	feed := newChannelFeed(t)
	m := newCounts()
	e := newTether(t, feed.srv.URL(), channelRules(t, m, feed.http.URL))
	a := dialApp(t, e.url, appOptions{})
	for _, ch := range channels {
		a.sendText(t, sub(ch))
	}
	feed.awaitSubscribed(t, channels...)
	for i := int64(1); i <= n; i++ {
		if i == 60 || i == 140 {
			feed.reset()
			for _, ch := range channels { // lost: nobody is subscribed
				feed.number(ch)
			}
			i++
			feed.awaitSubscribed(t, channels...)
		}
		for _, ch := range channels {
			publishFaulty(feed, ch, i, n)
		}
	}
	v := channelView{}
	v.until(t, a, n, channels...)
	a.expectOpen(t)
	m.awaitExactly(t, "held bytes", 0)
	if m.get("gap filled") == 0 || m.get("recovered http") == 0 || m.get("duplicate") == 0 {
		t.Errorf("gaps filled %d, recovered over HTTP %d, duplicates %d: want all > 0",
			m.get("gap filled"), m.get("recovered http"), m.get("duplicate"))
	}
	if n := m.get("gap closed") + m.get("gap skipped"); n != 0 {
		t.Errorf("%d gaps given up", n)
	}
	feed.mu.Lock()
	defer feed.mu.Unlock()
	if feed.badKeys != 0 || len(feed.requests) == 0 {
		t.Errorf("%d catch-up requests, %d without the upstream's key", len(feed.requests), feed.badKeys)
	}
}

// publishFaulty numbers event i of channel and sends it the way a faulty
// feed does: every 13th is dropped, every 7th sent twice and followed by a
// stale repeat, every 11th held back and sent after its successor. The last
// events always go out, so the final gap shows.
func publishFaulty(f *channelFeed, ch string, i, n int64) {
	seq, ev := f.number(ch)
	late := f.late[ch]
	delete(f.late, ch)
	switch {
	case i > n-3:
		f.send(ch, ev)
	case seq%13 == 0:
	case seq%11 == 0:
		f.late[ch] = ev
	case seq%7 == 0:
		f.send(ch, ev)
		f.send(ch, ev)
		f.send(ch, chanEvent(ch, seq-3))
	default:
		f.send(ch, ev)
	}
	if late != "" {
		f.send(ch, late)
	}
}

// catchUpFailure is a catch-up endpoint that cannot help.
type catchUpFailure struct {
	name    string
	handler http.HandlerFunc
}

var catchUpFailures = []catchUpFailure{
	{"404", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }},
	{"timeout", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
	{"garbage", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"t":"event","seq":4}, not json`))
	}},
}

// When HTTP catch-up fails (404, no answer, an answer that is not JSON),
// the gap waits TETHER_GAP_TIMEOUT, then the policy applies: close closes
// the app with 1011 and the gap in the reason; skip delivers on; notify
// injects the notice first. The endpoint was asked for the missing range.
func TestGapPolicyWhenCatchUpFails(t *testing.T) {
	const gapTimeout = 300 * time.Millisecond
	for _, failure := range catchUpFailures {
		for _, policy := range []proxy.GapPolicy{proxy.GapClose, proxy.GapSkip, proxy.GapNotify} {
			t.Run(failure.name+"/"+policy.String(), func(t *testing.T) {
				runGapPolicy(t, failure, policy, gapTimeout)
			})
		}
	}
}

func runGapPolicy(t *testing.T, failure catchUpFailure, policy proxy.GapPolicy, gapTimeout time.Duration) {
	probe := startLatenessProbe(t)
	queries := make(chan string, 16)
	catchUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries <- r.URL.RawQuery
		failure.handler(w, r)
	}))
	t.Cleanup(catchUp.Close)
	gapSent := make(chan time.Time, 1)
	more := make(chan struct{})
	up := newUpstream(t, upstreamConfig{quiet: true, onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) {
		if _, _, err := c.Read(c.Context()); err != nil { // the subscription
			return
		}
		for _, seq := range []int64{1, 2, 3} {
			_ = c.Send(chanEvent("a", seq))
		}
		gapSent <- time.Now()
		_ = c.Send(chanEvent("a", 7))
		_ = c.Send(chanEvent("a", 8))
		select {
		case <-more:
			_ = c.Send(chanEvent("a", 9))
		case <-c.Done():
		}
		<-c.Done()
	}})
	m := newCounts()
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.Rules.SeqPath = mustPath(t, "seq")
		o.Sequences = proxy.Sequences{
			GapFillURL: mustGapFillURL(t, catchUp.URL+`/catchup?from={{.From}}&to={{.To}}`),
			GapFill:    newGapFill(t, nil, 0),
			GapTimeout: gapTimeout,
			GapPolicy:  policy,
			GapNotice:  mustGapNotice(t, `{"t":"gap","stream":{{json .Stream}},"from":{{.From}},"to":{{.To}}}`),
		}
	})
	a := dialApp(t, e.url, appOptions{})
	a.sendText(t, sub("a"))
	for _, seq := range []int64{1, 2, 3} {
		a.expectText(t, chanEvent("a", seq))
	}
	sent := <-gapSent
	// The gap is settled when the app sees the policy's first effect: the
	// close, the notice, or the first message after the gap. What follows
	// (event 9, sent once the test asks for it) is later news. When it
	// came is checked below, against the gap timeout.
	var settled time.Duration
	switch policy {
	case proxy.GapClose:
		a.expectClosed(t, testTimeout, ws.StatusInternalServerError, "unrecoverable gap: missing 4-6")
		settled = time.Since(sent)
	case proxy.GapNotify:
		a.expectText(t, `{"t":"gap","stream":"","from":4,"to":6}`)
		settled = time.Since(sent)
		a.expectText(t, chanEvent("a", 7))
	case proxy.GapSkip:
		a.expectText(t, chanEvent("a", 7))
		settled = time.Since(sent)
	}
	if policy != proxy.GapClose {
		a.expectText(t, chanEvent("a", 8))
		close(more)
		a.expectText(t, chanEvent("a", 9))
		a.expectOpen(t)
	}
	// The gap timer fires gapTimeout after tether saw 7, later than sent;
	// the policy's effect then crosses a few goroutines and sockets.
	withinLate(t, probe, "gap settled", settled, gapTimeout, gapTimeout+2*slack)
	checkCatchUpAsked(t, probe, queries, gapTimeout)
	m.await(t, "gap "+map[proxy.GapPolicy]string{
		proxy.GapClose: labels.GapClosed, proxy.GapSkip: labels.GapSkipped, proxy.GapNotify: labels.GapNotified,
	}[policy], 1)
	if n := m.get("gap filled"); n != 0 {
		t.Errorf("%d gaps counted as filled", n)
	}
}

// checkCatchUpAsked fails unless the catch-up endpoint was asked for the
// missing range, once the gap has settled. The request had until the
// gap's deadline: on a starved machine it may not have reached the
// endpoint at all (tether then gave the gap up by its timeout, as it
// must), and only then, with this process's timers late by a good part of
// the gap timeout, is its absence excused. The test used to wait for the
// request with no bound and hung there until go test's timeout.
func checkCatchUpAsked(t *testing.T, probe *latenessProbe, queries <-chan string, gapTimeout time.Duration) {
	t.Helper()
	select {
	case q := <-queries:
		if q != "from=4&to=6" {
			t.Errorf("catch-up asked for %q, want from=4&to=6", q)
		}
	case <-time.After(slack):
		if late := probe.worst(); late >= gapTimeout/4 {
			t.Logf("the catch-up endpoint was never asked: the request had %v, and this process's timers were up to %v late", gapTimeout, late)
			return
		}
		t.Errorf("the catch-up endpoint was never asked for the missing range")
	}
}

func mustGapNotice(t *testing.T, text string) template.GapNotice {
	t.Helper()
	var n template.GapNotice
	if err := n.UnmarshalText([]byte(text)); err != nil {
		t.Fatalf("gap notice %q: %v", text, err)
	}
	return n
}

// A message that does not fit the hold buffer gets the policy at once,
// without waiting for the gap timeout.
func TestHoldFullSkipsAtOnce(t *testing.T) {
	up := newUpstream(t, upstreamConfig{quiet: true, onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) {
		if _, _, err := c.Read(c.Context()); err != nil {
			return
		}
		for _, seq := range []int64{1, 3, 4, 5} {
			_ = c.Send(chanEvent("a", seq) + strings.Repeat(" ", 100))
		}
		<-c.Done()
	}})
	m := newCounts()
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		o.Metrics = m
		o.Rules.SeqPath = mustPath(t, "seq")
		o.Sequences = proxy.Sequences{
			GapTimeout:   time.Hour,
			GapPolicy:    proxy.GapSkip,
			HoldMaxBytes: 250, // one message with its overhead, not two
		}
	})
	a := dialApp(t, e.url, appOptions{})
	a.sendText(t, sub("a"))
	for _, seq := range []int64{1, 3, 4, 5} {
		if got := strings.TrimSpace(string(a.next(t).data)); got != chanEvent("a", seq) {
			t.Fatalf("app got %s, want event %d", got, seq)
		}
	}
	m.await(t, "gap skipped", 1)
	m.awaitExactly(t, "held bytes", 0)
}

// awaitExactly waits until key's count is want, for counts that go down as
// well as up (held bytes).
func (c *counts) awaitExactly(t *testing.T, key string, want int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%q counted %d (now %d)", key, want, c.get(key)), func() bool { return c.get(key) == want })
}

// A gap that opens while a resume is unanswered is left to the resumed
// replay for half the gap timeout: when the replay brings the numbers, no
// catch-up request is made and the stream counts as recovered by resume;
// when it does not, the gap is fetched over HTTP after that half.
func TestGapLeftToResumedReplay(t *testing.T) {
	const gapTimeout = time.Second
	for _, replays := range []bool{true, false} {
		name := "replay fills the gap"
		if !replays {
			name = "replay never comes"
		}
		t.Run(name, func(t *testing.T) {
			requests := make(chan time.Time, 16)
			catchUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests <- time.Now()
				for seq := int64(6); seq <= 8; seq++ {
					fmt.Fprintln(w, chanEvent("a", seq))
				}
			}))
			t.Cleanup(catchUp.Close)
			gapSent := make(chan time.Time, 1)
			up := newUpstream(t, upstreamConfig{quiet: true, onConn: func(_ *upstreamEnv, c *upstreamtest.Conn) {
				if c.N() == 1 {
					firstConn(c)
					return
				}
				resumedConn(c, gapSent, replays)
			}})
			m := newCounts()
			e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
				resumeExample(t, m)(o)
				o.Sequences.GapFillURL = mustGapFillURL(t, catchUp.URL+`/catchup?from={{.From}}&to={{.To}}`)
				o.Sequences.GapFill = newGapFill(t, nil, 0)
				o.Sequences.GapTimeout = gapTimeout
			})
			a := dialApp(t, e.url, appOptions{})
			a.sendText(t, sub("a"))
			a.expectText(t, welcomeMsg("S1", 0, false))
			for seq := int64(1); seq <= 9; seq++ {
				a.expectText(t, chanEvent("a", seq))
			}
			sent := <-gapSent
			if replays {
				m.await(t, "recovered resume", 1)
				select {
				case <-requests:
					t.Fatal("the gap was fetched over HTTP although the resumed replay filled it")
				default:
				}
				return
			}
			within(t, "catch-up requested", (<-requests).Sub(sent), gapTimeout/2, gapTimeout/2+slack)
			m.await(t, "recovered http", 1)
		})
	}
}

// firstConn welcomes session S1, answers the subscription with events 1 to
// 5, then goes away (1001).
func firstConn(c *upstreamtest.Conn) {
	if _, _, err := c.Read(c.Context()); err != nil {
		return
	}
	_ = c.Send(welcomeMsg("S1", 0, false))
	for seq := int64(1); seq <= 5; seq++ {
		_ = c.Send(chanEvent("a", seq))
	}
	_ = c.CloseWith(1001, "going away")
}

// resumedConn answers a resume after 5 with the live event 9 first, and,
// when replays, the replay of 6 to 8 a tenth of a second later.
func resumedConn(c *upstreamtest.Conn, gapSent chan<- time.Time, replays bool) {
	_, data, err := c.Read(c.Context())
	if err != nil || !strings.Contains(string(data), `"after":5`) {
		return
	}
	_ = c.Send(welcomeMsg("S1", 5, false))
	gapSent <- time.Now()
	_ = c.Send(chanEvent("a", 9))
	if replays {
		select {
		case <-time.After(100 * time.Millisecond):
		case <-c.Done():
			return
		}
		for seq := int64(6); seq <= 8; seq++ {
			_ = c.Send(chanEvent("a", seq))
		}
	}
	<-c.Done()
}
