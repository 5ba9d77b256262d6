package sequence

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
)

// snapshotter scripts the snapshots (Config.Snapshot): each call waits for
// the test to answer it, or for its context to end.
type snapshotter struct {
	calls chan *snapshotCall
}

type snapshotCall struct {
	ctx    context.Context
	req    SnapshotRequest
	answer chan snapshotAnswer
}

type snapshotAnswer struct {
	snap Snapshot
	err  error
}

func (f *snapshotter) snapshot(ctx context.Context, r SnapshotRequest) (Snapshot, error) {
	c := &snapshotCall{ctx: ctx, req: r, answer: make(chan snapshotAnswer, 1)}
	f.calls <- c // buffered: a test that expects no call fails on its own
	select {
	case a := <-c.answer:
		return a.snap, a.err
	case <-ctx.Done():
		return Snapshot{}, fmt.Errorf("gapfill: %w", ctx.Err())
	}
}

// newSnapshotHarness is newHarness with scripted snapshots.
func newSnapshotHarness(t *testing.T, cfg Config) (*harness, *snapshotter) {
	t.Helper()
	f := &snapshotter{calls: make(chan *snapshotCall, 16)}
	cfg.Snapshot = f.snapshot
	return newHarness(t, cfg, false), f
}

func (h *harness) nextSnapshot(f *snapshotter) *snapshotCall {
	h.t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(waitBound):
		h.t.Fatalf("no snapshot asked for within %v", waitBound)
		return nil
	}
}

func expectNoSnapshot(t *testing.T, f *snapshotter) {
	t.Helper()
	select {
	case c := <-f.calls:
		t.Fatalf("unexpected snapshot of %+v", c.req)
	default:
	}
}

// answerSnapshot answers c and waits until the Sequencer has acted on it:
// the snapshot's goroutine flushes the App at the end of its turn whatever
// it got (see answer).
func (h *harness) answerSnapshot(c *snapshotCall, a snapshotAnswer) {
	h.t.Helper()
	for len(h.app.flushes) > 0 {
		<-h.app.flushes
	}
	c.answer <- a
	select {
	case <-h.app.flushes:
	case <-time.After(waitBound):
		h.t.Fatalf("snapshot answer not acted on within %v", waitBound)
	}
	h.s.Flush()
}

// Binance spot depth across a reconnect with no replay: the gap cannot be
// filled, so the snapshot is asked for at once (no wait for the timeout);
// the events held meanwhile that it covers are dropped and counted as
// duplicates, the first one after it (U <= N+1 <= u) and the rest follow in
// order.
func TestSnapshotAcrossReconnect(t *testing.T) {
	h, f := newSnapshotHarness(t, Config{Model: buffer.ModelRange, Policy: PolicyClose})
	h.burst(1, "a/1..3", "a/4..5")
	h.burst(2, "a/9..10", "a/11..13") // 6-8 lost with the connection
	c := h.nextSnapshot(f)
	if want := (SnapshotRequest{Stream: "a", Deadline: h.start.Add(testTimeout)}); c.req != want {
		t.Fatalf("snapshot of %+v, want %+v", c.req, want)
	}
	h.burst(2, "a/14..15")
	h.answerSnapshot(c, snapshotAnswer{snap: Snapshot{Data: []byte("book@11"), Seq: 11}})
	h.burst(2, "a/10..11", "a/16..16") // stale, then in order
	h.expectGot("a/1..3", "a/4..5", "book@11", "a/11..13", "a/14..15", "a/16..16")
	h.expectGaps(map[string]int{labels.GapResync: 1})
	h.expectRecovered(map[string]int{labels.RecoveryResync: 1})
	if dups, _, _, held := h.metrics.snapshot(); dups != 2 || held != 0 {
		t.Fatalf("%d duplicates, %d bytes held; want 2 (9..10 held, 10..11 live) and 0", dups, held)
	}
	if h.logged("snapshot requested") != 1 || h.logged("stream resynced") != 1 {
		t.Fatalf("log: %v", h.logs.All())
	}
	h.clock.Advance(2 * testTimeout)
	if h.app.closeCode != 0 {
		t.Fatalf("app closed with %d after the snapshot", h.app.closeCode)
	}
}

// A gap on a live connection may be a reordering: the snapshot is asked
// for only once TETHER_GAP_TIMEOUT passed without the gap being filled.
func TestSnapshotAfterTheTimeoutOnALiveConnection(t *testing.T) {
	h, f := newSnapshotHarness(t, Config{Policy: PolicySkip})
	h.burst(1, "a/1", "a/3")
	h.clock.Advance(testTimeout - time.Millisecond)
	expectNoSnapshot(t, f)
	h.clock.Advance(time.Millisecond)
	c := h.nextSnapshot(f)
	if want := h.start.Add(2 * testTimeout); !c.req.Deadline.Equal(want) {
		t.Fatalf("snapshot deadline %v, want %v (a full timeout)", c.req.Deadline, want)
	}
	h.answerSnapshot(c, snapshotAnswer{snap: Snapshot{Data: []byte("snap@3"), Seq: 3}})
	h.burst(1, "a/4")
	h.expectGot("a/1", "snap@3", "a/4") // 3 came before the snapshot, which covers it
	h.expectGaps(map[string]int{labels.GapResync: 1})
}

// A snapshot that fails is logged with what went wrong, counted, and the
// gap goes to the policy: notify sends the notice, then what was held.
func TestSnapshotFailedGoesToThePolicy(t *testing.T) {
	h, f := newSnapshotHarness(t, Config{Policy: PolicyNotify, Notice: mustNotice(t, "gap {{.From}}-{{.To}}")})
	h.burst(1, "a/1")
	h.burst(2, "a/5", "a/6")
	c := h.nextSnapshot(f)
	h.answerSnapshot(c, snapshotAnswer{err: errors.New("gapfill: HTTP 500 Internal Server Error")})
	h.burst(2, "a/7")
	h.expectGot("a/1", "gap 2-4", "a/5", "a/6", "a/7")
	h.expectGaps(map[string]int{labels.GapResyncFailed: 1, labels.GapNotified: 1})
	failed := h.logs.FilterMessage("snapshot failed").All()
	if len(failed) != 1 || failed[0].ContextMap()["error"] != "gapfill: HTTP 500 Internal Server Error" {
		t.Fatalf("snapshot failed lines: %v", failed)
	}
	given := h.logs.FilterMessage("gap given up, app notified").FilterField(fieldReason(whyResyncFailed))
	if given.Len() != 1 {
		t.Fatalf("gap given up lines: %v", h.logs.All())
	}
}

// A snapshot not answered within TETHER_GAP_TIMEOUT is cancelled at the
// deadline, and its end gives the gap up (close: the app is closed with
// 1011), with what its fetch met.
func TestSnapshotLateClosesUnderClose(t *testing.T) {
	h, f := newSnapshotHarness(t, Config{Policy: PolicyClose})
	h.burst(1, "a/1")
	h.burst(2, "a/5")
	c := h.nextSnapshot(f)
	h.clock.Advance(testTimeout - time.Millisecond)
	if h.app.closeCode != 0 {
		t.Fatalf("app closed before the snapshot's deadline")
	}
	for len(h.app.flushes) > 0 {
		<-h.app.flushes // the reader's
	}
	h.clock.Advance(time.Millisecond) // the timer's turn flushes, then the snapshot's
	select {
	case <-c.ctx.Done():
	default:
		t.Fatal("late snapshot not cancelled at its deadline")
	}
	for range 2 {
		select {
		case <-h.app.flushes:
		case <-time.After(waitBound):
			t.Fatalf("the cancelled snapshot did not end its turn within %v", waitBound)
		}
	}
	h.stop()
	h.expectGot("a/1")
	if h.app.closeCode != CloseUnrecoverable {
		t.Fatalf("app close code %d, want %d", h.app.closeCode, CloseUnrecoverable)
	}
	h.expectGaps(map[string]int{labels.GapResyncFailed: 1, labels.GapClosed: 1})
	failed := h.logs.FilterMessage("snapshot failed").All()
	want := errSnapshotLate.Error() + ": gapfill: context canceled" // the snapshotter's
	if len(failed) != 1 || failed[0].ContextMap()["error"] != want {
		t.Fatalf("snapshot failed lines: %v, want error %q", failed, want)
	}
}

// A gap the live stream fills while its snapshot is awaited ends the
// snapshot: its answer, when it comes, is not delivered.
func TestSnapshotNotUsedOnceTheGapIsFilled(t *testing.T) {
	h, f := newSnapshotHarness(t, Config{Policy: PolicySkip})
	h.burst(1, "a/1", "a/3")
	h.clock.Advance(testTimeout)
	c := h.nextSnapshot(f)
	h.burst(1, "a/2")
	select {
	case <-c.ctx.Done():
	default:
		t.Fatal("snapshot not cancelled when the gap was filled")
	}
	h.stop()
	h.expectGot("a/1", "a/2", "a/3")
	h.expectGaps(map[string]int{labels.GapFilled: 1})
}

// A catch-up that fails leaves the gap to a snapshot at once.
func TestSnapshotAfterAFailedCatchUp(t *testing.T) {
	f := &snapshotter{calls: make(chan *snapshotCall, 16)}
	h := newHarness(t, Config{Policy: PolicySkip, Snapshot: f.snapshot}, true)
	h.burst(1, "a/1", "a/4")
	h.answer(h.nextFetch(), fetchAnswer{err: errors.New("gapfill: HTTP 404 Not Found")})
	c := h.nextSnapshot(f)
	h.answerSnapshot(c, snapshotAnswer{snap: Snapshot{Data: []byte("snap@3"), Seq: 3}})
	h.expectGot("a/1", "snap@3", "a/4")
	h.expectGaps(map[string]int{labels.GapResync: 1})
}

// A catch-up still unanswered when the gap times out is abandoned for the
// snapshot: it is cancelled, and its end is not reported as a failure.
func TestSnapshotAbandonsAHangingCatchUp(t *testing.T) {
	f := &snapshotter{calls: make(chan *snapshotCall, 16)}
	h := newHarness(t, Config{Policy: PolicySkip, Snapshot: f.snapshot}, true)
	h.burst(1, "a/1", "a/4")
	fc := h.nextFetch()
	for len(h.app.flushes) > 0 {
		<-h.app.flushes // the reader's
	}
	// Three turns flush from here: the timer's (during Advance), the
	// cancelled catch-up's and the snapshot's, in an order of theirs.
	h.clock.Advance(testTimeout)
	c := h.nextSnapshot(f)
	select {
	case <-fc.ctx.Done():
	default:
		t.Fatal("catch-up not cancelled when the snapshot was asked for")
	}
	c.answer <- snapshotAnswer{snap: Snapshot{Data: []byte("snap@3"), Seq: 3}}
	for range 3 {
		select {
		case <-h.app.flushes:
		case <-time.After(waitBound):
			t.Fatalf("the snapshot and the catch-up did not end their turns within %v", waitBound)
		}
	}
	h.stop()
	h.expectGot("a/1", "snap@3", "a/4")
	h.expectGaps(map[string]int{labels.GapResync: 1})
	if n := h.logged("gap fetch failed"); n != 0 {
		t.Fatalf("%d gap fetch failed lines for the abandoned catch-up", n)
	}
}
