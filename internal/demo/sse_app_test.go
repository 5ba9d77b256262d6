package demo

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/sse/ssetest"
)

// The app is tested against ssetest.Server standing in for tether: a real
// event stream the test scripts, with numeric ids where tether's are
// "<token>-<n>" (the app treats both as opaque).

// testEventServer starts a server whose streams ask the app to reconnect
// after retry.
func testEventServer(t *testing.T, retry time.Duration) *ssetest.Server {
	s := ssetest.NewServer(ssetest.Options{Retry: retry})
	t.Cleanup(s.Close)
	return s
}

// openTestApp opens the app on s and waits until s streams to it.
func openTestApp(t *testing.T, s *ssetest.Server, n *narrator) *eventSource {
	t.Helper()
	es, err := openEventSource(t.Context(), s.URL()+"/events", DefaultRate, n)
	if err != nil {
		t.Fatalf("openEventSource: %v", err)
	}
	t.Cleanup(es.Close)
	ctx := t.Context()
	if err := s.WaitStreams(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return es
}

func publishSeq(s *ssetest.Server, seqs ...int64) {
	for _, seq := range seqs {
		s.Publish(ssetest.Event{Data: fmt.Sprintf(`{"t":"event","seq":%d,"price":100.00}`, seq)})
	}
}

// A stream that ends is counted and narrated as the bug it is behind
// tether, and the app reconnects as EventSource does: after the stream's
// retry, with the last event id, and reads on.
func TestEventSourceReconnectsWithLastEventID(t *testing.T) {
	out := newLineWriter()
	s := testEventServer(t, 10*time.Millisecond)
	es := openTestApp(t, s, sseNarrator(out))
	publishSeq(s, 1, 2, 3)
	eventually(t, func() bool { return es.Stats().events == 3 })
	s.DropAll()
	line, _ := out.waitFor(t, "!!! the app's stream ended")
	if !strings.Contains(line, "reconnects in 10ms with Last-Event-ID: 3") {
		t.Errorf("narration %q does not say how the app reconnects", line)
	}
	reqs, err := s.WaitRequests(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := reqs[1].LastEventID; got != "3" {
		t.Errorf("reconnected with Last-Event-ID %q, want 3", got)
	}
	if got := reqs[1].Header.Get("Accept"); got != "text/event-stream" {
		t.Errorf("reconnected with Accept %q", got)
	}
	if err := s.WaitStreams(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	publishSeq(s, 4)
	eventually(t, func() bool { return es.Stats().events == 4 })
	es.Close()
	st := es.Stats()
	if st.ends != 1 || st.requests != 2 || st.gaps+st.duplicates+st.late != 0 || st.lastSeq != 4 || st.lastID != "4" {
		t.Errorf("stats = %+v, want 1 end, 2 requests, events 1–4 in order, last id 4", st)
	}
	if !strings.Contains(st.endedBy, "the connection failed") {
		t.Errorf("endedBy = %q, want the cut connection", st.endedBy)
	}
}

// The app tracks seq numbers as a careful app does, and counts tether's
// notices and keep-alives.
func TestEventSourceAccounting(t *testing.T) {
	out := newLineWriter()
	s := testEventServer(t, 0)
	es := openTestApp(t, s, sseNarrator(out))
	publishSeq(s, 1, 2, 2, 4)
	s.Publish(ssetest.Event{Data: `{"t":"gap","from":5,"to":6}`})
	publishSeq(s, 7)
	s.Comment("keep-alive")
	s.Publish(ssetest.Event{Type: "tether-gap", Data: `{"reason":"evicted","lost":3}`})
	s.Publish(ssetest.Event{Type: "other", Data: "x"})
	eventually(t, func() bool { return es.Stats().other == 1 })
	st := es.Stats()
	want := appStats{events: 4, gaps: 1, missed: 1, duplicates: 1, notices: 1, announced: 2, tetherGaps: 1,
		keepAlives: 1, other: 1, requests: 1, lastSeq: 7, lastID: "8"}
	if st != want {
		t.Errorf("stats\n got %+v\nwant %+v", st, want)
	}
	for _, line := range []string{
		"app     first event: seq 1, with tether's id 1",
		"app     !!! duplicate: event 2 arrived again (after 2)",
		"app     !!! gap 3: 1 event missing without notice",
		"app     tether says events 5–6 are lost for good (gap notice)",
		`app     no event for a while, but the stream is open: tether writes ": keep-alive" comments`,
		`app     !!! tether-gap event {"reason":"evicted","lost":3}`,
	} {
		out.waitFor(t, line)
	}
}

// Events flowing again after an outage are narrated with the quiet they
// followed.
func TestEventSourceNarratesThePause(t *testing.T) {
	out := newLineWriter()
	clock := &manualClock{t: t0}
	s := testEventServer(t, 0)
	es := openTestApp(t, s, newNarrator(out, clock.now, demoSettings, false, sseMode().words))
	publishSeq(s, 1)
	eventually(t, func() bool { return es.Stats().events == 1 })
	clock.add(2500 * time.Millisecond)
	publishSeq(s, 2)
	out.waitFor(t, "app     events flow again after 2.5s of quiet: 2 follows 1, nothing lost, nothing twice")
}

// An EventSource that is refused on a reconnect fails for good.
func TestEventSourceGivesUpOnRefusal(t *testing.T) {
	out := newLineWriter()
	s := testEventServer(t, 10*time.Millisecond)
	es := openTestApp(t, s, sseNarrator(out))
	s.RespondNext(1, ssetest.Response{Status: http.StatusBadGateway, Body: "upstream gone"})
	s.EndAll()
	select {
	case <-es.Done():
	case <-time.After(testTimeout):
		t.Fatal("the app did not give up")
	}
	out.waitFor(t, "!!! tether refused the reconnect (HTTP 502")
	st := es.Stats()
	if st.ends != 1 || st.requests != 2 || !strings.Contains(st.gaveUp, "upstream gone") {
		t.Errorf("stats = %+v, want 1 end, 2 requests, given up on the 502", st)
	}
	if !strings.Contains(st.endedBy, "tether ended the response") {
		t.Errorf("endedBy = %q, want a clean end", st.endedBy)
	}
}

func TestOpenEventSourceRefused(t *testing.T) {
	s := testEventServer(t, 0)
	s.RespondNext(1, ssetest.Response{Status: http.StatusServiceUnavailable, Body: "tether is draining"})
	_, err := openEventSource(t.Context(), s.URL(), DefaultRate, sseNarrator(newLineWriter()))
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || !strings.Contains(err.Error(), "tether is draining") {
		t.Errorf("openEventSource = %v, want the 503 and its body", err)
	}
}

// The app's own Close is not a stream end.
func TestEventSourceCloseIsNotAnEnd(t *testing.T) {
	out := newLineWriter()
	s := testEventServer(t, 0)
	es := openTestApp(t, s, sseNarrator(out))
	publishSeq(s, 1)
	eventually(t, func() bool { return es.Stats().events == 1 })
	es.Close()
	es.Close() // idempotent
	if st := es.Stats(); st.ends != 0 || st.requests != 1 {
		t.Errorf("stats = %+v, want no end and one request", st)
	}
	if err := s.WaitStreams(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	close(out.lines)
	for l := range out.lines {
		if strings.Contains(l, "!!!") {
			t.Errorf("narrated %q", l)
		}
	}
}
