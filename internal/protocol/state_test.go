package protocol

import (
	"errors"
	"slices"
	"testing"

	"github.com/tetherproxy/tether/buffer"
)

// exampleRules are the rules the State tests classify with: a login answered
// with ok, keyed subscriptions with request ids, a welcome seen once, acked
// orders, and sequence numbers.
func exampleRules(t testing.TB) Protocol {
	return NewRules(Rules{
		AuthMatch: compile(t, `{"op":"login"}`), AuthOKMatch: compile(t, `{"op":"login","ok":true}`),
		SubscribeMatch: compile(t, `{"op":"sub"}`), UnsubscribeMatch: compile(t, `{"op":"unsub"}`),
		SubscriptionKey: path(t, "channel"), ReplyIDPath: path(t, "req"),
		HideOnReconnectMatch: compile(t, `{"t":"welcome"}`),
		AckIDPath:            path(t, "id"), AckMatch: compile(t, `{"t":"ack"}`),
		SeqPath: path(t, "seq"), StreamPath: path(t, "channel"),
	})
}

// conversation drives a State with real messages classified by a Protocol,
// as a session does.
type conversation struct {
	t   *testing.T
	p   Protocol
	st  *State
	gen uint64
}

func newConversation(t *testing.T, p Protocol) *conversation {
	budget := buffer.NewBudget(100, 1<<20)
	st := NewState(p.Capabilities(), Limits{MaxMessages: 100, MaxBytes: 1 << 20, Budget: budget, Overflow: buffer.OverflowDropOldest})
	return &conversation{t: t, p: p, st: st}
}

// app sends one app message while connection gen is live.
func (c *conversation) app(msg string) App {
	c.t.Helper()
	a := c.p.App([]byte(msg))
	m := buffer.Message{Data: []byte(msg), ID: a.AckID}
	if !a.Restorable() {
		if a.AckID != "" {
			if _, err := c.st.Pending().Add(m, c.gen); err != nil {
				c.t.Fatalf("Pending.Add(%s): %v", msg, err)
			}
		}
		return a
	}
	ref, err := c.st.Remember(a, m)
	if err != nil {
		c.t.Fatalf("Remember(%s): %v", msg, err)
	}
	c.st.SentLive(a, ref, c.gen)
	return a
}

// upstream delivers one upstream message on the current connection and
// returns the verdict.
func (c *conversation) upstream(msg string) Hide {
	return c.st.Upstream(c.gen, c.p.Upstream([]byte(msg)))
}

// reconnect begins the restore of the next connection.
func (c *conversation) reconnect() Snapshot {
	c.gen++
	return c.st.Begin(c.gen)
}

func payloads(es []buffer.ReplayEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Message.Data)
	}
	return out
}

// The replayed set is the latest login, then what the subscriptions add up
// to, in the order the app sent them: an unsubscribe cancels its subscribe
// and is not replayed, a repeated subscribe moves to the end, a
// subscription the server ended is gone.
func TestStateReplayedSet(t *testing.T) {
	c := newConversation(t, exampleRules(t))
	c.gen = 1
	for _, msg := range []string{
		`{"op":"login","user":"old"}`,
		`{"op":"sub","channel":"a"}`,
		`{"op":"sub","channel":"b"}`,
		`{"op":"sub","channel":"c"}`,
		`{"op":"login","user":"new"}`,
		`{"op":"unsub","channel":"a"}`,
		`{"op":"sub","channel":"b","depth":5}`,
		`{"op":"sub"}`,
	} {
		c.app(msg)
	}
	s := c.reconnect()
	if s.Login == nil || string(s.Login.Data) != `{"op":"login","user":"new"}` {
		t.Fatalf("login replayed %v, want the latest", s.Login)
	}
	want := []string{`{"op":"sub","channel":"c"}`, `{"op":"sub","channel":"b","depth":5}`, `{"op":"sub"}`}
	if got := payloads(s.Entries); !slices.Equal(got, want) {
		t.Fatalf("replayed %q, want %q", got, want)
	}
	if s.Wait == nil {
		t.Fatal("no login wait with AuthOKMatch set")
	}
}

// A subscription the server ends (Upstream.Ends) is not replayed.
func TestStateEndsSubscription(t *testing.T) {
	c := newConversation(t, exampleRules(t))
	c.gen = 1
	c.app(`{"op":"sub","channel":"a"}`)
	c.app(`{"op":"sub","channel":"b"}`)
	if h := c.st.Upstream(c.gen, Upstream{Ends: true, EndKey: "a"}); h != Shown {
		t.Fatalf("the end of a subscription hidden: %v", h)
	}
	if got := payloads(c.reconnect().Entries); !slices.Equal(got, []string{`{"op":"sub","channel":"b"}`}) {
		t.Fatalf("replayed %q after the server ended a", got)
	}
}

// What the app has seen once is hidden when the restore makes the upstream
// say it again; what it has not seen reaches it.
func TestStateHides(t *testing.T) {
	c := newConversation(t, exampleRules(t))
	c.gen = 1
	steps := []struct {
		do   string // "app", "up" or "reconnect"
		msg  string
		want Hide
	}{
		{"up", `{"t":"welcome","seq":1}`, Shown},
		{"app", `{"op":"login","req":1}`, Shown},
		{"up", `{"op":"login","ok":true,"req":1}`, Shown}, // the app's own login reply
		{"app", `{"op":"sub","channel":"a","req":2}`, Shown},
		{"up", `{"t":"subscribed","req":2}`, Shown},
		{"app", `{"op":"sub","channel":"b","req":3}`, Shown}, // never answered before the loss
		{"app", `{"t":"order","id":"o1"}`, Shown},
		{"up", `{"t":"ack","id":"o1"}`, Shown},
		{"reconnect", "", Shown},
		{"up", `{"t":"welcome","seq":1}`, HideRepeat},
		{"up", `{"op":"login","ok":true,"req":1}`, HideLoginReply},
		{"up", `{"t":"subscribed","req":2}`, HideReply},
		{"up", `{"t":"subscribed","req":3}`, Shown}, // the app waits for this one
		{"up", `{"t":"ack","id":"o1"}`, HideAck},
		{"up", `{"t":"ack","id":"o2"}`, Shown},      // never pending, never acked: not tether's to hide
		{"up", `{"t":"subscribed","req":2}`, Shown}, // no request waits for it any more
		{"reconnect", "", Shown},
		{"up", `{"t":"subscribed","req":3}`, HideReply}, // answered on the last connection
	}
	var wait *LoginWait
	for i, s := range steps {
		switch s.do {
		case "app":
			c.app(s.msg)
		case "reconnect":
			wait = c.reconnect().Wait
		case "up":
			if got := c.upstream(s.msg); got != s.want {
				t.Fatalf("step %d, %s: %v, want %v", i, s.msg, got, s.want)
			}
		}
	}
	select {
	case <-wait.Answered():
		t.Fatal("the last restore's login wait released without a login reply")
	default:
	}
}

// A login reply releases the restore of its own connection only.
func TestStateLoginWait(t *testing.T) {
	c := newConversation(t, exampleRules(t))
	c.gen = 1
	c.app(`{"op":"login"}`)
	w := c.reconnect().Wait
	if got := c.st.Upstream(c.gen-1, c.p.Upstream([]byte(`{"op":"login","ok":true}`))); got != Shown {
		t.Fatalf("a login reply from the old connection: %v", got)
	}
	select {
	case <-w.Answered():
		t.Fatal("released by the old connection's reply")
	default:
	}
	c.upstream(`{"op":"login","ok":true}`)
	select {
	case <-w.Answered():
	default:
		t.Fatal("not released by the reply on its connection")
	}
	// Lost and EndWait forget a wait: a later reply releases nothing.
	w2 := c.reconnect().Wait
	c.st.Lost(c.gen)
	c.upstream(`{"op":"login","ok":true}`)
	select {
	case <-w2.Answered():
		t.Fatal("released after its connection was lost")
	default:
	}
}

// Only a restorable message is remembered, and a full replay log says so
// instead of dropping a subscription.
func TestStateReplayLogFull(t *testing.T) {
	p := exampleRules(t)
	st := NewState(p.Capabilities(), Limits{MaxMessages: 1, MaxBytes: 1 << 10, Budget: buffer.NewBudget(1, 1<<10)})
	sub := func(ch string) (App, buffer.Message) {
		msg := `{"op":"sub","channel":"` + ch + `"}`
		return p.App([]byte(msg)), buffer.Message{Data: []byte(msg)}
	}
	if _, err := st.Remember(sub("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Remember(sub("b")); !errors.Is(err, buffer.ErrReplayLogFull) {
		t.Fatalf("second subscription over a cap of 1: %v", err)
	}
	if _, err := st.Remember(sub("a")); err != nil {
		t.Fatalf("a repeated subscribe replaces its entry: %v", err)
	}
}

// Without acks there is no ack store, and an Ack of a protocol that has
// none is not a repeat.
func TestStateWithoutAcks(t *testing.T) {
	st := NewState(Capabilities{}, Limits{MaxMessages: 4, MaxBytes: 64})
	if st.Pending() != nil {
		t.Fatal("an ack store without Capabilities.Acks")
	}
	if h := st.Upstream(1, Upstream{Ack: true, AckID: "x"}); h != Shown {
		t.Fatalf("ack without acks: %v", h)
	}
}

func TestHideString(t *testing.T) {
	for h, want := range map[Hide]string{
		Shown: "", HideLoginReply: "reply to a replayed login", HideReply: "reply to a replayed request",
		HideRepeat: "seen before a reconnect", HideAck: "repeated acknowledgement", Hide(9): "Hide(9)",
	} {
		if got := h.String(); got != want {
			t.Errorf("Hide(%d).String() = %q, want %q", h, got, want)
		}
	}
}

// What a connection delivered can be settled on it only: not on a newer
// one, not once it is lost; the newest ids are kept, MaxMessages of them.
func TestStateDelivered(t *testing.T) {
	st := NewState(Capabilities{}, Limits{MaxMessages: 2, MaxBytes: 1 << 10, Budget: buffer.NewBudget(2, 1<<10)})
	if st.Delivered(1, "a") {
		t.Fatal("delivered before anything was")
	}
	for _, id := range []string{"a", "b"} {
		if h := st.Upstream(1, Upstream{DeliveryID: id}); h != Shown {
			t.Fatalf("a delivery is hidden (%v)", h)
		}
	}
	if !st.Delivered(1, "a") || !st.Delivered(1, "b") || st.Delivered(2, "a") || st.Delivered(1, "c") {
		t.Fatal("connection 1's deliveries misread")
	}
	st.Upstream(1, Upstream{DeliveryID: "c"})
	if st.Delivered(1, "a") || !st.Delivered(1, "c") {
		t.Fatal("the oldest delivery is not the one forgotten")
	}
	st.Upstream(2, Upstream{DeliveryID: "d"})
	if st.Delivered(1, "c") || st.Delivered(2, "c") || !st.Delivered(2, "d") {
		t.Fatal("a newer connection kept the older one's deliveries")
	}
	st.Lost(2)
	if st.Delivered(2, "d") {
		t.Fatal("a lost connection's delivery can still be settled")
	}
}

// A reply names the logged subscription it answers (Capabilities.Reply):
// the app's own reply, then the replay's; Answered rewrites the logged
// message the next replay sends, or ends it.
func TestStateReplied(t *testing.T) {
	c := newConversation(t, exampleRules(t))
	c.gen = 1
	c.app(`{"op":"sub","channel":"a","req":"1"}`)
	hide, r := c.st.UpstreamReply(c.gen, c.p.Upstream([]byte(`{"req":"1","ok":true}`)))
	if hide != Shown || r == nil || r.Own || r.Entry.Key != "a" || r.Entry.Op != AppSubscribe {
		t.Fatalf("the app's reply: %v, %+v", hide, r)
	}
	if err := c.st.Answered(r, Answer{Log: []byte(`{"op":"sub","channel":"a","req":"1","epoch":"e"}`)}); err != nil {
		t.Fatal(err)
	}
	if got := payloads(c.reconnect().Entries); !slices.Equal(got, []string{`{"op":"sub","channel":"a","req":"1","epoch":"e"}`}) {
		t.Fatalf("replayed %q after the rewrite", got)
	}
	hide, r = c.st.UpstreamReply(c.gen, c.p.Upstream([]byte(`{"req":"1","ok":true}`)))
	if hide != HideReply || r == nil || !r.Own || r.Entry.Key != "a" {
		t.Fatalf("the replay's reply: %v, %+v", hide, r)
	}
	if _, r := c.st.UpstreamReply(c.gen, c.p.Upstream([]byte(`{"req":"9"}`))); r != nil {
		t.Fatalf("a reply to nothing logged names %+v", r)
	}
	if err := c.st.Answered(r, Answer{End: true}); err != nil {
		t.Fatal(err)
	}
	if got := c.reconnect().Entries; len(got) != 0 {
		t.Fatalf("replayed %q after the end", payloads(got))
	}
}

// awaitingReplies is the example rules with Capabilities.AwaitReplies.
type awaitingReplies struct{ Protocol }

func (p awaitingReplies) Capabilities() Capabilities {
	c := p.Protocol.Capabilities()
	c.AwaitReplies = true
	return c
}

// With AwaitReplies a restore's snapshot waits for the reply to each replay
// with a reply id; without, or with no such
// replay, there is nothing to wait for; a lost connection forgets the wait.
func TestStateReplyWait(t *testing.T) {
	if s := newConversation(t, exampleRules(t)); s.app(`{"op":"sub","channel":"a","req":"1"}`).Kind == AppSubscribe && s.reconnect().Replies != nil {
		t.Fatal("a reply wait without AwaitReplies")
	}
	c := newConversation(t, awaitingReplies{exampleRules(t)})
	c.gen = 1
	c.app(`{"op":"sub","channel":"none"}`) // no reply id: not awaited
	if c.reconnect().Replies != nil {
		t.Fatal("a reply wait for replays without a reply id")
	}
	c.app(`{"op":"sub","channel":"a","req":"1"}`)
	c.app(`{"op":"sub","channel":"b","req":"2"}`)
	c.upstream(`{"req":"1"}`)
	c.upstream(`{"req":"2"}`)
	w := c.reconnect().Replies
	if w == nil || w.Left() != 2 {
		t.Fatalf("reply wait %+v, want 2 replies to come", w)
	}
	c.upstream(`{"req":"1"}`)
	select {
	case <-w.Answered():
		t.Fatal("released with a reply to come")
	default:
	}
	if h := c.upstream(`{"req":"2"}`); h != HideReply {
		t.Fatalf("the reply to a replay the app had the answer to: %v", h)
	}
	select {
	case <-w.Answered():
	default:
		t.Fatal("not released by the last reply")
	}
	w2 := c.reconnect().Replies
	c.st.Lost(c.gen)
	c.upstream(`{"req":"1"}`)
	c.upstream(`{"req":"2"}`)
	select {
	case <-w2.Answered():
		t.Fatal("released after its connection was lost")
	default:
	}
}
