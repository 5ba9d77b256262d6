package proxy_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// lineProtocol is a protocol of the shape the presets have, for the session's
// side of the capabilities the rules protocol does not use: its messages are
// JSON lines, several to a WebSocket message or one spread over several
// (Framing, like Centrifugo or NATS); "ping" is the app's keepalive, answered
// with "pong" while the upstream is down (the upstream's "pong" answers it),
// and the app expects a "beat" from its server every beatEvery (Keepalive);
// a subscription is replayed from the
// last number the app got on its channel (Replay, like a Centrifugo recover);
// {"t":"complete","channel":C} from the server ends subscription C (like
// graphql-ws). What each line is otherwise, the rules protocol reads.
type lineProtocol struct {
	protocol.Protocol
	beatEvery time.Duration // 0: no beat
}

const beatEvery = 40 * time.Millisecond

func newLineProtocol(t *testing.T) lineProtocol {
	return lineProtocol{protocol.NewRules(protocol.Rules{
		SubscribeMatch: mustMatch(t, `{"op":"sub"}`), UnsubscribeMatch: mustMatch(t, `{"op":"unsub"}`),
		SubscriptionKey: mustPath(t, "channel"),
		SeqPath:         mustPath(t, "seq"), StreamPath: mustPath(t, "channel"),
	}), beatEvery}
}

func (p lineProtocol) Capabilities() protocol.Capabilities {
	c := p.Protocol.Capabilities()
	c.ReadsApp, c.ReadsUpstream = true, true
	c.Framing = func() protocol.Framer { return &lineFramer{} }
	c.Keepalive = protocol.Keepalive{
		Answer: func([]byte) protocol.Message { return protocol.Message{Op: ws.OpText, Data: []byte("pong")} },
		Every:  p.beatEvery,
		Beat:   protocol.Message{Op: ws.OpText, Data: []byte("beat")},
	}
	c.Replay = lineReplayer{}
	return c
}

func (p lineProtocol) App(data []byte) protocol.App {
	if string(data) == "ping" {
		return protocol.App{Kind: protocol.AppKeepalive}
	}
	return p.Protocol.App(data)
}

func (p lineProtocol) Upstream(data []byte) protocol.Upstream {
	u := p.Protocol.Upstream(data)
	u.KeepaliveReply = string(data) == "pong"
	if gjson.GetBytes(data, "t").Str == "complete" {
		u.Ends, u.EndKey = true, gjson.GetBytes(data, "channel").Str
	}
	return u
}

// lineFramer splits on '\n' and keeps an unterminated line for the next
// message. A NUL byte cannot be framed.
type lineFramer struct {
	partial []byte
	out     [][]byte
}

func (f *lineFramer) Split(_ ws.OpCode, data []byte) ([][]byte, error) {
	buf := append(f.partial, data...)
	var err error
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf, err = buf[:i], errors.New("NUL byte in a line")
	}
	lines := bytes.Split(buf, []byte("\n"))
	f.out = append(f.out[:0], lines[:len(lines)-1]...)
	f.partial = nil
	if err == nil {
		f.partial = bytes.Clone(lines[len(lines)-1])
	}
	return f.out, err
}

// lineReplayer resumes a channel's subscription from the last number the
// app got on it; the channel "bad" cannot be rewritten.
type lineReplayer struct{}

func (lineReplayer) Replay(e protocol.Entry, cur protocol.Current) ([]byte, error) {
	if e.Op != protocol.AppSubscribe || !e.Keyed {
		return e.Message, nil
	}
	if e.Key == "bad" {
		return nil, errors.New("no resume point for channel bad")
	}
	last, ok := cur.LastSeq(e.Key)
	if !ok {
		return e.Message, nil
	}
	return fmt.Appendf(nil, `{"op":"sub","channel":%q,"from":%d}`, e.Key, last), nil
}

func withLineProtocol(t *testing.T, m proxy.Metrics) func(*proxy.Options) {
	return withProtocol(newLineProtocol(t), m)
}

func withProtocol(p protocol.Protocol, m proxy.Metrics) func(*proxy.Options) {
	return func(o *proxy.Options) {
		o.Protocol = p
		if m != nil {
			o.Metrics = m
		}
	}
}

// A protocol that packs several messages into one WebSocket message, or one
// into several, has each routed and delivered alone, both ways; a line cut
// by a lost connection is not joined with the next connection's bytes, and
// what cannot be framed is dropped, counted and, from the app, closes it.
func TestProtocolFraming(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	// Without the beat: the outage this test makes lasts the backoff and a
	// dial, which under load outlasts beatEvery, and a beat due in it would
	// reach the app before "ling" (as it must: TestProtocolKeepalive). The
	// app here must get exactly what the upstream sent.
	lines := newLineProtocol(t)
	lines.beatEvery = 0
	e := newTether(t, up.srv.URL(), withProtocol(lines, m))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)

	a.sendText(t, "one\ntwo\nth")
	a.sendText(t, "ree\n")
	for _, want := range []string{"one", "two", "three"} {
		up.expectFromApp(t, 1, ws.OpText, want)
	}
	if err := c.Send("x\ny\nha"); err != nil {
		t.Fatal(err)
	}
	if err := c.Send("lf\n"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"x", "y", "half"} {
		a.expectText(t, want)
	}

	if err := c.Send("dang"); err != nil { // never finished on this connection
		t.Fatal(err)
	}
	_ = c.Reset()
	c = up.nextConn(t)
	if err := c.Send("ling\n"); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, "ling")
	if err := c.Send("ok\nbro\x00ken\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.Send("after\n"); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, "ok")
	a.expectText(t, "after")
	m.await(t, "app dropped "+labels.DropUnframed, 1)

	a.sendText(t, "last\n")
	up.expectFromApp(t, 2, ws.OpText, "last")
	a.sendText(t, "bad\x00line\n")
	a.expectClosed(t, testTimeout, ws.StatusProtocolError, "message not framed by the protocol")
	m.await(t, "app dropped "+labels.DropUnframed, 2)
	up.expectNothingFromApp(t)
}

// While the upstream is down, the app's keepalives are answered by tether
// and the beats its client library expects arrive every beatEvery; while a
// connection is live, keepalives go upstream and tether sends no beat.
func TestProtocolKeepalive(t *testing.T) {
	var down atomic.Bool
	up := newUpstream(t, upstreamConfig{refuse: func(n int) (int, http.Header) {
		if n > 1 && down.Load() {
			return http.StatusBadGateway, nil
		}
		return 0, nil
	}})
	e := newTether(t, up.srv.URL(), withLineProtocol(t, nil))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	awaitRestores(t, e, 1)

	a.sendText(t, "ping\n")
	up.expectFromApp(t, 1, ws.OpText, "ping")
	if err := c.Send("pong\n"); err != nil { // answered: its loss below does not answer it again
		t.Fatal(err)
	}
	a.expectText(t, "pong")
	expectNoBeat(t, a, 3*beatEvery)

	down.Store(true)
	_ = c.Reset()
	e.states.await(t, upstream.StateLost)
	for range 2 {
		expectBeat(t, a, beatEvery+slack)
	}
	a.sendText(t, "ping\n")
	deadline := time.After(testTimeout)
	for got := ""; got != "pong"; {
		select {
		case msg := <-a.msgs:
			if got = string(msg.data); got != "pong" && got != "beat" {
				t.Fatalf("app got %q while the upstream was down, want pong or beat", got)
			}
		case <-deadline:
			t.Fatal("no pong while the upstream was down")
		}
	}

	down.Store(false)
	c = up.nextConn(t)
	awaitRestores(t, e, 2)
	a.sendText(t, "sent-after\n")
	up.expectFromApp(t, c.N(), ws.OpText, "sent-after") // the ping answered while down was not queued
	// The beats of the outage are behind the app; one decided just before
	// the connection went live may still be on its way: at most that one.
	for drained := false; !drained; {
		select {
		case m := <-a.msgs:
			if string(m.data) != "beat" {
				t.Fatalf("app got %q, want only the outage's beats", m.data)
			}
		default:
			drained = true
		}
	}
	end := time.After(3*beatEvery + slack)
	for beats := 0; ; {
		select {
		case m := <-a.msgs:
			if beats++; string(m.data) != "beat" || beats > 1 {
				t.Fatalf("app got %q (message %d since the restore) while the upstream was live", m.data, beats)
			}
			continue
		case <-end:
		}
		break
	}
}

// awaitRestores waits until the server has made n connections live.
func awaitRestores(t *testing.T, e *tetherEnv, n uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d restores", n), func() bool { return e.srv.RestoreCounters().Restores >= n })
}

func expectBeat(t *testing.T, a *app, within time.Duration) {
	t.Helper()
	select {
	case m := <-a.msgs:
		if string(m.data) != "beat" {
			t.Fatalf("app got %q, want a beat", m.data)
		}
	case <-time.After(within):
		t.Fatalf("no beat within %v while the upstream was down", within)
	}
}

// expectNoBeat watches the app for d: nothing may arrive.
func expectNoBeat(t *testing.T, a *app, d time.Duration) {
	t.Helper()
	select {
	case m := <-a.msgs:
		t.Fatalf("app got %q while the upstream was live", m.data)
	case <-time.After(d):
	}
}

// A restore replays each subscription as the protocol rewrites it from what
// the app got (here, the last number on its channel), sends one that fails
// to rewrite as the app sent it, and leaves out the one the server ended.
func TestProtocolReplay(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	e := newTether(t, up.srv.URL(), withLineProtocol(t, nil))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	subs := []string{`{"op":"sub","channel":"a"}`, `{"op":"sub","channel":"b"}`, `{"op":"sub","channel":"c"}`, `{"op":"sub","channel":"bad"}`}
	a.sendText(t, strings.Join(subs, "\n")+"\n")
	for _, s := range subs {
		up.expectFromApp(t, 1, ws.OpText, s)
	}
	feed := []string{`{"channel":"a","seq":1}`, `{"channel":"b","seq":7}`, `{"channel":"a","seq":2}`, `{"t":"complete","channel":"c"}`}
	if err := c.Send(strings.Join(feed, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	for _, f := range feed {
		a.expectText(t, f)
	}

	_ = c.Reset()
	c = up.nextConn(t)
	for _, want := range []string{`{"op":"sub","channel":"a","from":2}`, `{"op":"sub","channel":"b","from":7}`, `{"op":"sub","channel":"bad"}`} {
		up.expectFromApp(t, c.N(), ws.OpText, want)
	}
	a.sendText(t, "marker\n")
	up.expectFromApp(t, c.N(), ws.OpText, "marker")
	up.expectNothingFromApp(t)
}

// The upstream client's Confirm and HeartbeatReply are the protocol's: set
// on the client options, they would be replaced, so New refuses them.
func TestNewRefusesUpstreamPredicates(t *testing.T) {
	for name, set := range map[string]func(*upstream.Options){
		"Confirm":        func(o *upstream.Options) { o.Confirm = func([]byte) bool { return true } },
		"HeartbeatReply": func(o *upstream.Options) { o.HeartbeatReply = func([]byte) bool { return true } },
	} {
		opts := baseOptions(t, "ws://127.0.0.1:1/", newStateRecorder())
		set(&opts.Upstream)
		if _, err := proxy.New(opts); err == nil {
			t.Errorf("proxy.New accepted Upstream.%s", name)
		}
	}
}

// negotiatedProtocol is lineProtocol with beats agreed per session
// (Keepalive.Negotiate, like STOMP's heart-beat headers): the app logs in
// with "hello", the upstream answers "welcome N", and the app then expects
// a beat every N ms.
type negotiatedProtocol struct{ lineProtocol }

func (p negotiatedProtocol) Capabilities() protocol.Capabilities {
	c := p.lineProtocol.Capabilities()
	c.Keepalive.Every = 0
	c.Keepalive.Negotiate = func(login, answer []byte) time.Duration {
		if string(login) != "hello" {
			return 0
		}
		var ms int
		if _, err := fmt.Sscanf(string(answer), "welcome %d", &ms); err != nil {
			return 0
		}
		return time.Duration(ms) * time.Millisecond
	}
	return c
}

func (p negotiatedProtocol) App(data []byte) protocol.App {
	if string(data) == "hello" {
		return protocol.App{Kind: protocol.AppLogin}
	}
	return p.lineProtocol.App(data)
}

func (p negotiatedProtocol) Upstream(data []byte) protocol.Upstream {
	u := p.lineProtocol.Upstream(data)
	u.LoginOK = strings.HasPrefix(string(data), "welcome ")
	return u
}

// Beats negotiated per session: none while down before the upstream
// answered the login, then every negotiated interval while down, and none
// once a later answer negotiates 0.
func TestProtocolNegotiatedBeats(t *testing.T) {
	var down atomic.Bool
	up := newUpstream(t, upstreamConfig{refuse: func(n int) (int, http.Header) {
		if n > 1 && down.Load() {
			return http.StatusBadGateway, nil
		}
		return 0, nil
	}})
	e := newTether(t, up.srv.URL(), withProtocol(negotiatedProtocol{newLineProtocol(t)}, nil))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	awaitRestores(t, e, 1)

	down.Store(true)
	_ = c.Reset()
	e.states.await(t, upstream.StateLost)
	expectNoBeat(t, a, 3*beatEvery) // nothing negotiated yet
	down.Store(false)
	c = up.nextConn(t)
	awaitRestores(t, e, 2)

	a.sendText(t, "hello\n")
	up.expectFromApp(t, c.N(), ws.OpText, "hello")
	if err := c.Send(fmt.Sprintf("welcome %d\n", beatEvery.Milliseconds())); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, fmt.Sprintf("welcome %d", beatEvery.Milliseconds()))
	down.Store(true)
	_ = c.Reset()
	e.states.await(t, upstream.StateLost)
	for range 3 {
		expectBeat(t, a, beatEvery+slack)
	}

	down.Store(false)
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, "hello") // the login replayed
	if err := c.Send("welcome 0\n"); err != nil {
		t.Fatal(err)
	}
	awaitRestores(t, e, 3)
	for drained := false; !drained; { // the outage's beats
		select {
		case m := <-a.msgs:
			if string(m.data) != "beat" && string(m.data) != "welcome 0" {
				t.Fatalf("app got %q, want the outage's beats", m.data)
			}
		case <-time.After(beatEvery + slack):
			drained = true
		}
	}
	down.Store(true)
	_ = c.Reset()
	e.states.await(t, upstream.StateLost)
	expectNoBeat(t, a, 3*beatEvery) // 0 negotiated
}

// resendProtocol is the rules with acks, and a Resend that marks a re-send
// as MQTT sets DUP on a PUBLISH.
type resendProtocol struct{ protocol.Protocol }

func (p resendProtocol) Capabilities() protocol.Capabilities {
	c := p.Protocol.Capabilities()
	c.Resend = func(data []byte) []byte {
		return bytes.Replace(data, []byte(`"dup":false`), []byte(`"dup":true`), 1)
	}
	return c
}

// A message waiting for its ack when its connection is lost is re-sent on
// the next as the protocol rewrites a re-send (Capabilities.Resend); one
// acknowledged is not, and one that goes out live for the first time is
// sent as the app sent it.
func TestProtocolResend(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	p := resendProtocol{protocol.NewRules(protocol.Rules{AckIDPath: mustPath(t, "id"), AckMatch: mustMatch(t, `{"t":"ack"}`)})}
	e := newTether(t, up.srv.URL(), withProtocol(p, nil))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	one, two := `{"id":"1","dup":false}`, `{"id":"2","dup":false}`
	a.sendText(t, one)
	up.expectFromApp(t, c.N(), ws.OpText, one)
	a.sendText(t, two)
	up.expectFromApp(t, c.N(), ws.OpText, two)
	if err := c.Send(`{"t":"ack","id":"1"}`); err != nil {
		t.Fatal(err)
	}
	a.expectText(t, `{"t":"ack","id":"1"}`)

	_ = c.Reset()
	c = up.nextConn(t)
	up.expectFromApp(t, c.N(), ws.OpText, `{"id":"2","dup":true}`)
	three := `{"id":"3","dup":false}`
	a.sendText(t, three)
	up.expectFromApp(t, c.N(), ws.OpText, three)
	up.expectNothingFromApp(t)
}
