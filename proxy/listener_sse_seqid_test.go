package proxy_test

import (
	"crypto/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/proxy"
)

// sseChannelRules sequences {"ch":…,"seq":…} messages per channel.
func sseChannelRules(t *testing.T, m *counts) func(*proxy.Options) {
	return func(o *proxy.Options) {
		o.Metrics = m
		o.Rules.SeqPath = mustPath(t, "seq")
		o.Rules.StreamPath = mustPath(t, "ch")
		o.Sequences = proxy.Sequences{GapTimeout: 2 * time.Second}
	}
}

func channelEvent(ch string, seq int) string {
	return `{"ch":"` + ch + `","seq":` + strconv.Itoa(seq) + `}`
}

// expectEvents reads the next events and fails unless they are want, in
// order, with the ids ids: exactly these, nothing between.
func (es *eventSource) expectEvents(t *testing.T, want, ids []string) {
	t.Helper()
	for i := range want {
		ev := es.next(t)
		if ev.Data != want[i] || ev.ID != ids[i] {
			t.Fatalf("event %d: got %q id %q, want %q id %q", i+1, ev.Data, ev.ID, want[i], ids[i])
		}
	}
}

// With sequencing, an sse:// app reads each numbered message with the id
// "<stream>:<seq>", the upstream's own position, and a message without a
// number with tether's "<token>-<n>". A reconnecting EventSource's
// Last-Event-ID in either form resumes its lingering session right after
// that event: exactly the events it missed, then the live ones, on the
// same upstream connection.
func TestSSESequencedIDs(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	e := newSSETether(t, up.srv.URL(), sseChannelRules(t, m))
	es := openEventSource(t, e.url)
	first := es.nextItem(t) // the id-only block naming the session
	token, _ := splitID(t, first.LastEventID)
	c := up.nextConn(t)
	for _, msg := range []string{channelEvent("a", 1), channelEvent("b", 1), "plain", channelEvent("a", 2)} {
		sendOrFail(t, c.Send(msg))
	}
	es.expectEvents(t,
		[]string{channelEvent("a", 1), channelEvent("b", 1), "plain", channelEvent("a", 2)},
		[]string{"a:1", "b:1", token + "-3", "a:2"})

	// Away after a:2: a stream:seq id resumes.
	es.drop()
	sendOrFail(t, c.Send(channelEvent("b", 2)))
	sendOrFail(t, c.Send(channelEvent("a", 3)))
	es.connect(t) // Last-Event-ID: a:2
	es.expectEvents(t, []string{channelEvent("b", 2), channelEvent("a", 3)}, []string{"b:2", "a:3"})
	m.await(t, "sse resume resumed", 1)

	// Back from after the unnumbered message: its token id resumes.
	es.drop()
	sendOrFail(t, c.Send(channelEvent("a", 4)))
	es.lastID = token + "-3"
	es.connect(t)
	es.expectEvents(t,
		[]string{channelEvent("a", 2), channelEvent("b", 2), channelEvent("a", 3), channelEvent("a", 4)},
		[]string{"a:2", "b:2", "a:3", "a:4"})
	m.await(t, "sse resume resumed", 2)

	sendOrFail(t, c.Send(channelEvent("b", 3)))
	es.expectEvents(t, []string{channelEvent("b", 3)}, []string{"b:3"})
	es.expectOpen(t)
	if n := up.srv.Handshakes(); n != 1 {
		t.Errorf("upstream saw %d handshakes, want 1: the app resumed its session", n)
	}
	e.expectSessions(t, 1)
}

// With sequencing, a Last-Event-ID no session here holds starts a new
// session, live only, after a tether-gap naming why: session_gone for an
// id tether writes (a <stream>:<seq> or <token>-<n> of a session that
// ended, or of a tether that restarted), foreign_id for one it cannot
// read, which is also a warning in the log. Each is counted.
func TestSSESequencedIDUnknown(t *testing.T) {
	tests := []struct {
		name, id, reason string
	}{
		{"stream and number", "a:7", "session_gone"},
		{"number of the unnamed stream", "7", "session_gone"},
		{"token", rand.Text() + "-7", "session_gone"},
		{"not a number", "a:x", "foreign_id"},
		{"no stream before the colon", ":7", "foreign_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, upstreamConfig{})
			m := newCounts()
			core, logs := observer.New(zapcore.WarnLevel)
			e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) {
				sseChannelRules(t, m)(o)
				o.Logger = zap.New(core)
			})
			es := newEventSource(t, e.url, nil)
			es.lastID = tc.id
			es.connect(t)
			_, id := es.expectGap(t, tc.reason)
			token, n := splitID(t, id)
			if n != 0 {
				t.Fatalf("gap notice id %q, want the new session's <token>-0", id)
			}
			c := up.nextConn(t)
			sendOrFail(t, c.Send(channelEvent("a", 8)))
			sendOrFail(t, c.Send("plain"))
			es.expectEvents(t, []string{channelEvent("a", 8), "plain"}, []string{"a:8", token + "-2"})
			m.await(t, "sse resume "+tc.reason, 1)
			warned := logs.FilterMessageSnippet("Last-Event-ID is not an id").All()
			if want := tc.reason == "foreign_id"; (len(warned) == 1) != want {
				t.Fatalf("%d warnings about the id, want one only for foreign_id", len(warned))
			}
			if len(warned) == 1 && !strings.Contains(warned[0].ContextMap()["last_event_id"].(string), tc.id) {
				t.Errorf("warning %v does not name the id %q", warned[0].ContextMap(), tc.id)
			}
		})
	}
}

// Without sequencing there is no <stream>:<seq>: an id of that form is
// foreign, like any other id tether does not write.
func TestSSEUnsequencedSeqIDIsForeign(t *testing.T) {
	up := newUpstream(t, upstreamConfig{})
	m := newCounts()
	e := newSSETether(t, up.srv.URL(), func(o *proxy.Options) { o.Metrics = m })
	es := newEventSource(t, e.url, nil)
	es.lastID = "a:7"
	es.connect(t)
	es.expectGap(t, "foreign_id")
	m.await(t, "sse resume foreign_id", 1)
}
