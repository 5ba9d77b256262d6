package proxy_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/rules"
	"github.com/tetherproxy/tether/proxy"
)

func mustMatch(t *testing.T, pattern string) *rules.Matcher {
	t.Helper()
	m, err := rules.Compile(pattern)
	if err != nil {
		t.Fatalf("Compile(%q): %v", pattern, err)
	}
	return m
}

func mustPath(t *testing.T, path string) rules.Path {
	t.Helper()
	p, err := rules.ParsePath(path)
	if err != nil {
		t.Fatalf("ParsePath(%q): %v", path, err)
	}
	return p
}

// designExample is docs/design.md's example configuration, without the parts of
// later issues (session capture, resume message, sequences):
//
//	TETHER_SUBSCRIBE_MATCH={"t":"sub"}
//	TETHER_UNSUBSCRIBE_MATCH={"t":"unsub"}
//	TETHER_SUBSCRIPTION_KEY=channel
//	TETHER_CONFIRM_MATCH={"t":"welcome"}
//	TETHER_HIDE_ON_RECONNECT_MATCH={"t":"welcome"}
//	TETHER_ACK_ID_PATH=id
//	TETHER_ACK_MATCH={"t":"ack"}
func designExample(t *testing.T) func(*proxy.Options) {
	return func(o *proxy.Options) {
		o.Rules = protocol.Rules{
			ConfirmMatch:         mustMatch(t, `{"t":"welcome"}`),
			SubscribeMatch:       mustMatch(t, `{"t":"sub"}`),
			UnsubscribeMatch:     mustMatch(t, `{"t":"unsub"}`),
			SubscriptionKey:      mustPath(t, "channel"),
			HideOnReconnectMatch: mustMatch(t, `{"t":"welcome"}`),
			AckIDPath:            mustPath(t, "id"),
			AckMatch:             mustMatch(t, `{"t":"ack"}`),
		}
	}
}

func sub(ch string) string   { return `{"t":"sub","channel":"` + ch + `"}` }
func unsub(ch string) string { return `{"t":"unsub","channel":"` + ch + `"}` }

// docs/design.md's "done means": with the example configuration, a naive client
// that only sends sub, unsub and msg keeps receiving exactly its channels
// across a reset, a half-open stall and a restart, sees one welcome, and
// every message it sent is acknowledged once, although the upstream forgets
// everything with each socket, loses one ack and repeats two.
func TestRestoreDesignExample(t *testing.T) {
	up := newProtoServer(t, protoOptions{
		welcome: `{"t":"welcome","session":"S"}`,
		dropAck: map[string]bool{"m4": true},
		dupAck:  map[string]bool{"m2": true, "m6": true},
	})
	e := newTether(t, up.srv.URL(), designExample(t))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	tl := newTally()
	for _, m := range []string{sub("a"), sub("b"), sub("c"), unsub("b"), msgText("m1"), msgText("m2"), msgText("m3")} {
		a.sendText(t, m)
	}
	tl.expectChannels(t, a, 0, "a", "c")

	phases := []struct {
		fault  fault
		during []string // sent right after the fault, before tether has noticed it or while it reconnects
		want   []string
	}{
		{restoreFaults[0], []string{sub("d"), unsub("a"), msgText("m4")}, []string{"c", "d"}},
		{restoreFaults[1], []string{msgText("m5"), sub("e"), msgText("m6")}, []string{"c", "d", "e"}},
		{restoreFaults[2], []string{unsub("d"), sub("a"), msgText("m7")}, []string{"a", "c", "e"}},
	}
	for i, ph := range phases {
		ph.fault.kill(c)
		for _, m := range ph.during {
			a.sendText(t, m)
		}
		c = up.nextConn(t)
		tl.expectChannels(t, a, i+1, ph.want...)
		t.Logf("after %s: socket %d read %q", ph.fault.name, c.N(), up.connLog(c.N()))
	}

	for i := 1; i <= 7; i++ {
		id := fmt.Sprintf("m%d", i)
		if tl.acks[id] != 1 || up.receivedCount(id) < 1 {
			t.Errorf("%s: the upstream read it %d times, the app saw %d acks; want at least 1 and exactly 1",
				id, up.receivedCount(id), tl.acks[id])
		}
	}
	if n := up.receivedCount("m4"); n < 2 {
		t.Errorf("m4, whose first ack was lost, reached the upstream %d times; want a re-send after the next fault", n)
	}
	if tl.welcomes != 1 || len(tl.other) > 0 {
		t.Errorf("app saw %d welcomes and %q; want one welcome and nothing else", tl.welcomes, tl.other)
	}
	up.expectNoViolations(t)
	a.expectOpen(t)
	// The last restore counts after its replies reached the app: wait for
	// it rather than read the counters as the app's view completes.
	awaitRestores(t, e, 4)
	rc := e.srv.RestoreCounters()
	t.Logf("counters: %+v", rc)
	if rc.Restores < 4 || rc.Replayed == 0 || rc.Resent == 0 || rc.HiddenRepeats < 3 || rc.DuplicateAcks < 2 {
		t.Errorf("counters %+v: want 4 restores, replays, re-sends, 3 hidden welcomes, 2 repeated acks", rc)
	}
}

// binanceRules: a login that must be answered first, Binance-style
// subscriptions whose replies carry the request id, a welcome seen once.
func binanceRules(t *testing.T) func(*proxy.Options) {
	return func(o *proxy.Options) {
		o.Rules = protocol.Rules{
			AuthMatch:            mustMatch(t, `{"op":"login"}`),
			AuthOKMatch:          mustMatch(t, `{"op":"login","ok":true}`),
			SubscribeMatch:       mustMatch(t, `{"method":"SUBSCRIBE"}`),
			UnsubscribeMatch:     mustMatch(t, `{"method":"UNSUBSCRIBE"}`),
			SubscriptionKey:      mustPath(t, "params.0"),
			ReplyIDPath:          mustPath(t, "id"),
			HideOnReconnectMatch: mustMatch(t, `{"t":"welcome"}`),
		}
	}
}

func subscribe(stream string, id int) string {
	return fmt.Sprintf(`{"method":"SUBSCRIBE","params":[%q],"id":%d}`, stream, id)
}

func unsubscribe(stream string, id int) string {
	return fmt.Sprintf(`{"method":"UNSUBSCRIBE","params":[%q],"id":%d}`, stream, id)
}

func login(token string, id int) string {
	return fmt.Sprintf(`{"op":"login","token":%q,"id":%d}`, token, id)
}

// Login then subscribe, with request ids. On every new socket the login
// goes first and the subscriptions wait for its answer (the upstream would
// refuse them otherwise); a socket whose login is never answered fails the
// attempt after the dial timeout, before any subscription; the app sees one
// welcome, one answer per request it sent, and none to tether's replays,
// except for requests it is still waiting on.
func TestRestoreLoginThenSubscribe(t *testing.T) {
	const silent = 3 // the socket whose login is never answered
	up := newProtoServer(t, protoOptions{
		welcome:     `{"t":"welcome"}`,
		login:       true,
		loginDelay:  50 * time.Millisecond,
		answerLogin: func(n int) bool { return n != silent },
	})
	e := newTether(t, up.srv.URL(), binanceRules(t))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	tl := newTally()
	a.sendText(t, login("s3cret", 1))
	tl.until(t, a, "the login answer", func() bool { return tl.logins == 1 })
	tl.expectChannels(t, a, 0)
	for _, m := range []string{subscribe("btcusdt@trade", 2), subscribe("ethusdt@trade", 3),
		unsubscribe("ethusdt@trade", 4), subscribe("bnbusdt@trade", 5)} {
		a.sendText(t, m)
	}
	tl.expectChannels(t, a, 1, "bnbusdt@trade", "btcusdt@trade")

	// A reset: login, its answer hidden, both subscriptions replayed, their
	// answers hidden.
	restoreFaults[0].kill(c)
	c = up.nextConn(t)
	tl.expectChannels(t, a, 2, "bnbusdt@trade", "btcusdt@trade")

	// A stall, with a subscription sent into it: it has no answer yet, so
	// the answer to its replay is the app's. The next socket never answers
	// the login: the attempt fails after the dial timeout without sending
	// anything else, and the one after it works.
	restoreFaults[1].kill(c)
	a.sendText(t, subscribe("solusdt@trade", 6))
	if c = up.nextConn(t); c.N() != silent {
		t.Fatalf("socket %d, want %d", c.N(), silent)
	}
	opened := time.Now()
	c = up.nextConn(t)
	if d := time.Since(opened); d < dialTimeout {
		t.Errorf("gave up on the unanswered login after %v, want the dial timeout %v", d, dialTimeout)
	}
	if got := up.connLog(silent); !slices.Equal(got, []string{"login"}) {
		t.Errorf("socket %d, whose login was never answered, read %q; want only the login", silent, got)
	}
	tl.expectChannels(t, a, 3, "bnbusdt@trade", "btcusdt@trade", "solusdt@trade")

	// A restart, and meanwhile the app logs in again (a rotated token) and
	// subscribes once more: both go out once, and their answers are its.
	restoreFaults[2].kill(c)
	a.sendText(t, login("r0tated", 7))
	a.sendText(t, subscribe("xrpusdt@trade", 9))
	c = up.nextConn(t)
	tl.expectChannels(t, a, 4, "bnbusdt@trade", "btcusdt@trade", "solusdt@trade", "xrpusdt@trade")
	if log := up.connLog(c.N()); len(log) == 0 || log[0] != "login" || strings.Count(strings.Join(log, "\n"), "xrpusdt") != 1 {
		t.Errorf("socket %d read %q; want the login first and xrpusdt once", c.N(), log)
	}

	want := map[string]int{"2": 1, "3": 1, "4": 1, "5": 1, "6": 1, "9": 1}
	if !mapsEqual(tl.replies, want) {
		t.Errorf("answers the app saw by request id: %v, want %v", tl.replies, want)
	}
	if tl.logins != 2 || tl.welcomes != 1 || len(tl.other) > 0 {
		t.Errorf("app saw %d login answers, %d welcomes, and %q; want 2, 1 and nothing else", tl.logins, tl.welcomes, tl.other)
	}
	for _, n := range []int{2, 4, 5} {
		if log := up.connLog(n); len(log) == 0 || log[0] != "login" {
			t.Errorf("socket %d read %q; want the login first", n, log)
		}
	}
	up.expectNoViolations(t)
	a.expectOpen(t)
	rc := e.srv.RestoreCounters()
	if rc.AuthTimeouts != 1 || rc.HiddenReplies == 0 {
		t.Errorf("counters %+v: want 1 login timeout and hidden replies", rc)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// What the app sends while no connection exists is sent once when one
// does: the login and the subscription by the restore (not also from the
// outbox), then the queued message, in that order.
func TestRestoreSendsWhatWaitedOnce(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	up := newProtoServer(t, protoOptions{
		welcome: `{"t":"welcome"}`,
		login:   true,
		refuse: func(int) (int, http.Header) {
			if down.Load() {
				return http.StatusServiceUnavailable, nil
			}
			return 0, nil
		},
	})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		binanceRules(t)(o)
		o.Rules.AckIDPath = mustPath(t, "id")
		o.Rules.AckMatch = mustMatch(t, `{"t":"ack"}`)
	})
	a := dialApp(t, e.url, appOptions{})
	a.sendText(t, login("s3cret", 1))
	a.sendText(t, subscribe("btcusdt@trade", 2))
	a.sendText(t, msgText("m1"))
	a.ping(t, "all read while down")
	down.Store(false)
	c := up.nextConn(t)
	tl := newTally()
	tl.expectChannels(t, a, 0, "btcusdt@trade")
	want := []string{"login", subscribe("btcusdt@trade", 2), msgText("m1"), `{"t":"probe","n":0}`}
	if got := up.connLog(c.N()); !slices.Equal(got, want) {
		t.Errorf("socket read %q, want %q", got, want)
	}
	if tl.logins != 1 || tl.replies["2"] != 1 || tl.acks["m1"] != 1 {
		t.Errorf("app saw %d login answers, %v, acks %v; want its own answers once", tl.logins, tl.replies, tl.acks)
	}
	up.expectNoViolations(t)
}

// A subscription the app sends while a restore waits for the login answer
// is missing from that restore's snapshot: it is sent once, after the
// replayed ones, and on the next socket once again, from the log only.
func TestRestoreSubscriptionDuringRestore(t *testing.T) {
	hold := make(chan struct{})
	up := newProtoServer(t, protoOptions{
		welcome: `{"t":"welcome"}`,
		login:   true,
		holdLogin: func(n int) <-chan struct{} {
			if n == 2 {
				return hold
			}
			return nil
		},
	})
	e := newTether(t, up.srv.URL(), binanceRules(t))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	tl := newTally()
	a.sendText(t, login("s3cret", 1))
	tl.until(t, a, "the login answer", func() bool { return tl.logins == 1 })
	a.sendText(t, subscribe("btcusdt@trade", 2))
	tl.expectChannels(t, a, 1, "btcusdt@trade")

	restoreFaults[0].kill(c)
	c = up.nextConn(t)
	eventually(t, "login on the new socket", func() bool { return len(up.connLog(c.N())) > 0 })
	a.sendText(t, subscribe("ethusdt@trade", 3))
	a.ping(t, "subscription read") // tether has taken it while the restore waits
	close(hold)
	tl.expectChannels(t, a, 2, "btcusdt@trade", "ethusdt@trade")
	want := []string{"login", subscribe("btcusdt@trade", 2), subscribe("ethusdt@trade", 3), `{"t":"probe","n":2}`}
	if got := up.connLog(c.N()); !slices.Equal(got, want) {
		t.Errorf("socket %d read %q, want %q", c.N(), got, want)
	}

	restoreFaults[0].kill(c)
	c = up.nextConn(t)
	tl.expectChannels(t, a, 3, "btcusdt@trade", "ethusdt@trade")
	want = []string{"login", subscribe("btcusdt@trade", 2), subscribe("ethusdt@trade", 3), `{"t":"probe","n":3}`}
	if got := up.connLog(c.N()); !slices.Equal(got, want) {
		t.Errorf("socket %d read %q, want %q", c.N(), got, want)
	}
	if tl.replies["2"] != 1 || tl.replies["3"] != 1 || tl.logins != 1 {
		t.Errorf("answers %v, %d login answers; want one each", tl.replies, tl.logins)
	}
	up.expectNoViolations(t)
}

// A socket that closes while the restore waits for the login answer fails
// the attempt like a silent one, and the next socket is restored.
func TestRestoreLoginClosed(t *testing.T) {
	up := newProtoServer(t, protoOptions{
		welcome: `{"t":"welcome"}`,
		login:   true,
		holdLogin: func(n int) <-chan struct{} {
			if n == 2 {
				return make(chan struct{}) // never answered: the test closes the socket
			}
			return nil
		},
	})
	e := newTether(t, up.srv.URL(), binanceRules(t))
	a := dialApp(t, e.url, appOptions{})
	c := up.nextConn(t)
	tl := newTally()
	a.sendText(t, login("s3cret", 1))
	tl.until(t, a, "the login answer", func() bool { return tl.logins == 1 })
	a.sendText(t, subscribe("btcusdt@trade", 2))
	tl.expectChannels(t, a, 0, "btcusdt@trade")
	restoreFaults[0].kill(c)
	c = up.nextConn(t)
	eventually(t, "login on socket 2", func() bool { return len(up.connLog(c.N())) > 0 })
	closed := time.Now()
	_ = c.CloseWith(1001, "going away")
	c = up.nextConn(t)
	if d := time.Since(closed); d > backoffCap+slack {
		t.Errorf("reconnected %v after the close during the login, want within %v", d, backoffCap+slack)
	}
	tl.expectChannels(t, a, 1, "btcusdt@trade")
	if got := up.connLog(2); !slices.Equal(got, []string{"login"}) {
		t.Errorf("socket 2 read %q, want only the login", got)
	}
	up.expectNoViolations(t)
}

// The replay log is bounded like the outbox; a subscription that does not
// fit closes the app with 1013 "replay log full" instead of being left out
// of the next replay silently.
func TestReplayLogFullClosesApp(t *testing.T) {
	up := newProtoServer(t, protoOptions{welcome: `{"t":"welcome"}`})
	e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
		designExample(t)(o)
		o.OutboxMaxMessages = 3
	})
	a := dialApp(t, e.url, appOptions{})
	up.nextConn(t)
	for _, ch := range []string{"a", "b", "c", "a"} { // a re-subscribe replaces
		a.sendText(t, sub(ch))
	}
	a.ping(t, "still open")
	a.expectOpen(t)
	a.sendText(t, sub("d"))
	a.expectClosed(t, testTimeout, 1013, "replay log full")
	if n := e.srv.RestoreCounters().ReplayLogFull; n != 1 {
		t.Errorf("ReplayLogFull = %d, want 1", n)
	}
}

// The replay cost: messages sent on a new socket for N subscriptions whose
// history is about 3·N app messages (each subscribed twice, every other one
// unsubscribed and subscribed again), and how long the restore took.
func TestReplayCost(t *testing.T) {
	for _, n := range []int{1, 100, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			up := newProtoServer(t, protoOptions{welcome: `{"t":"welcome"}`, quiet: true})
			e := newTether(t, up.srv.URL(), func(o *proxy.Options) {
				designExample(t)(o)
				o.OutboxMaxMessages = 10_000
				o.Logger = quietLogger(t)
				noHeartbeat(o)
			})
			a := dialApp(t, e.url, appOptions{})
			c := up.nextConn(t)
			var want []string
			history := 0
			for i := range n {
				ch := fmt.Sprintf("ch%04d", i)
				want = append(want, ch)
				msgs := []string{sub(ch), sub(ch)}
				if i%2 == 0 {
					msgs = append(msgs, unsub(ch), sub(ch))
				}
				for _, m := range msgs {
					a.sendText(t, m)
				}
				history += len(msgs)
			}
			tl := newTally()
			tl.expectChannels(t, a, 0, want...)
			killed := time.Now()
			restoreFaults[0].kill(c)
			c = up.nextConn(t)
			tl.expectChannels(t, a, 1, want...)
			took := time.Since(killed)
			sent := len(up.connLog(c.N())) - 1 // the probe is the test's
			t.Logf("replay cost: %d subscriptions (%d app messages of history) → %d messages on the new socket; reset to probe answered in %v",
				n, history, sent, took)
			if sent != n {
				t.Errorf("%d messages replayed for %d subscriptions, want %d", sent, n, n)
			}
		})
	}
}
