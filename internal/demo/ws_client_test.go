package demo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// scriptedTether stands in for tether: a WebSocket server that greets the
// client, checks its subscription, then runs script.
func scriptedTether(t *testing.T, script func(c *upstreamtest.Conn)) (*upstreamtest.Server, <-chan string) {
	t.Helper()
	subs := make(chan string, 1)
	srv, err := upstreamtest.NewServer(upstreamtest.Options{
		Greeting: welcome("S", 0, false),
		OnConn: func(c *upstreamtest.Conn) {
			_, data, err := c.Read(c.Context())
			if err != nil {
				return
			}
			subs <- string(data)
			script(c)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, subs
}

func dialTestClient(t *testing.T, url string, out *lineWriter) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := dialClient(ctx, url, DefaultRate, wsNarrator(out))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestClientAccountsForGapsDuplicatesAndLateEvents(t *testing.T) {
	srv, subs := scriptedTether(t, func(c *upstreamtest.Conn) {
		msgs := []string{`{"t":"subscribed","channel":"prices"}`}
		for _, seq := range []string{"1", "2", "3", "7", "8", "8", "5"} {
			msgs = append(msgs, `{"t":"event","seq":`+seq+`,"price":100.00}`)
		}
		for _, m := range msgs {
			if c.Send(m) != nil {
				return
			}
		}
		<-c.Done()
	})
	out := newLineWriter()
	c := dialTestClient(t, srv.URL(), out)
	if got := <-subs; got != subMessage {
		t.Errorf("subscription = %q, want %q", got, subMessage)
	}
	_, lines := out.waitFor(t, "out of order") // the last message's news
	want := []string{
		"client  first event: seq 1",
		"client  !!! gap 4–6: 3 events missing without notice; tether should have filled it or said so",
		"client  !!! duplicate: event 8 arrived again (after 8)",
		"client  !!! out of order: event 5 arrived after 8",
	}
	for i, w := range want {
		if i >= len(lines) || !strings.HasSuffix(strings.TrimSuffix(lines[i], "\n"), w) {
			t.Errorf("line %d = %q, want it to end with %q", i, lines[i:min(i+1, len(lines))], w)
		}
	}
	st := c.Stats()
	wantSt := appStats{events: 6, gaps: 1, missed: 2, duplicates: 1, late: 1, welcomes: 1, acks: 1, lastSeq: 8}
	if st != wantSt {
		t.Errorf("stats = %+v, want %+v", st, wantSt)
	}
}

// A snapshot restarts the count at its number and a gap notice gives its
// numbers up: neither is a gap the client must report, and both are told.
func TestClientAcceptsSnapshotsAndGapNotices(t *testing.T) {
	srv, _ := scriptedTether(t, func(c *upstreamtest.Conn) {
		for _, m := range []string{
			`{"t":"event","seq":1,"price":1.00}`,
			`{"t":"event","seq":2,"price":1.00}`,
			`{"t":"snapshot","at":40,"price":1.00}`,
			`{"t":"event","seq":41,"price":1.00}`,
			`{"t":"gap","from":42,"to":44}`,
			`{"t":"event","seq":45,"price":1.00}`,
			`{"t":"event","seq":46,"price":1.00}`,
		} {
			if c.Send(m) != nil {
				return
			}
		}
		<-c.Done()
	})
	out := newLineWriter()
	c := dialTestClient(t, srv.URL(), out)
	_, lines := out.waitFor(t, "gap notice")
	want := []string{
		"client  first event: seq 1",
		"client  snapshot at event 40: the feed could no longer replay events 3–40, so the client takes its state from the snapshot and reads on from 41",
		"client  tether says events 42–44 are lost for good (gap notice); the client reads on",
	}
	for i, w := range want {
		if i >= len(lines) || !strings.HasSuffix(strings.TrimSuffix(lines[i], "\n"), w) {
			t.Errorf("line %d = %q, want it to end with %q", i, lines[i:min(i+1, len(lines))], w)
		}
	}
	eventually(t, func() bool { return c.Stats().events == 5 })
	st := c.Stats()
	wantSt := appStats{events: 5, snapshots: 1, notices: 1, announced: 3, welcomes: 1, lastSeq: 46}
	if st != wantSt {
		t.Errorf("stats = %+v, want %+v", st, wantSt)
	}
}

// A socket closed under the client is what tether must prevent; the client
// counts it and says so loudly.
func TestClientReportsAClose(t *testing.T) {
	srv, _ := scriptedTether(t, func(c *upstreamtest.Conn) {
		_ = c.CloseWith(1001, "going away")
	})
	out := newLineWriter()
	c := dialTestClient(t, srv.URL(), out)
	line, _ := out.waitFor(t, "!!!")
	if !strings.Contains(line, `tether closed the socket with 1001 "going away"`) || !strings.Contains(line, "tether bug") {
		t.Errorf("close narration = %q", line)
	}
	<-c.Done()
	st := c.Stats()
	if st.ends != 1 || !strings.Contains(st.endedBy, "1001") {
		t.Errorf("stats = %+v, want one close by 1001", st)
	}
}

func TestClientCloseIsNotCounted(t *testing.T) {
	closed := make(chan *upstreamtest.CloseFrame, 1)
	srv, _ := scriptedTether(t, func(c *upstreamtest.Conn) {
		for {
			_, _, err := c.Read(c.Context())
			var cf *upstreamtest.CloseFrame
			if errors.As(err, &cf) {
				closed <- cf
			}
			if err != nil {
				return
			}
		}
	})
	out := newLineWriter()
	c := dialTestClient(t, srv.URL(), out)
	c.Close()
	select {
	case cf := <-closed:
		if cf.Code != 1000 {
			t.Errorf("client closed with %d, want 1000", cf.Code)
		}
	case <-time.After(testTimeout):
		t.Fatal("the server never saw the client's close frame")
	}
	if st := c.Stats(); st.ends != 0 {
		t.Errorf("closes = %d after the client's own close, want 0", st.ends)
	}
	c.Close() // idempotent
}
