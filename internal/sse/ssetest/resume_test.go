package ssetest

import (
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/tetherproxy/tether/internal/sse"
)

// TestDropAndResume is the scenario tether's SSE upstream is built for: a
// connection dies mid-stream (events published just before the drop may
// or may not have made it), the client reconnects with the Reader's last
// event ID, and the events it saw across both connections are 1..n, in
// order, without a gap or a duplicate.
func TestDropAndResume(t *testing.T) {
	ctx := testContext(t)
	s := newServer(t, Options{History: 100})
	c := newClient(t)
	var seen []string

	first := connect(t, ctx, c, s.URL(), nil)
	if err := s.WaitStreams(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		s.Publish(Event{Data: "e" + strconv.Itoa(i+1)})
	}
	seen = append(seen, first.next(t, ctx).Event.ID) // at least one arrived
	s.DropAll()
	rest, err := first.rest(t, ctx)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("dropped stream ended with %v", err)
	}
	for _, it := range rest {
		seen = append(seen, it.Event.ID)
	}

	last := first.r.LastEventID()
	second := connect(t, ctx, c, s.URL(), header{"Last-Event-ID": last})
	if err := s.WaitStreams(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Publish(Event{Data: "e6"})
	for len(seen) < 6 {
		it := second.next(t, ctx)
		if it.Kind != sse.KindEvent || it.Event.Data != "e"+it.Event.ID {
			t.Fatalf("unexpected item %+v", it)
		}
		seen = append(seen, it.Event.ID)
	}
	for i, id := range seen {
		if id != strconv.Itoa(i+1) {
			t.Fatalf("ids seen = %v, want 1..6 in order", seen)
		}
	}
	req := s.Requests()[1]
	if req.LastEventID != last || req.GapFrom != 0 {
		t.Errorf("resume request = %+v, want Last-Event-ID %s without a gap", req, last)
	}
}
