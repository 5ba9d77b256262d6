package sequence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/gapfill"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/template"
)

// A snapshot over HTTP (TETHER_RESYNC_URL), for feeds whose apps rebuild
// their state from one (a Binance order book): when a gap cannot be filled
// (nothing else can fill it across a reconnect, the catch-up failed, or
// TETHER_GAP_TIMEOUT passed), the stream's snapshot is fetched instead of
// giving the gap up. It is delivered as one message and the stream is
// reset to its number (Tracker.Resync): held messages it covers are
// dropped and counted as duplicates, the later ones are delivered in order
// by the model. A snapshot has TETHER_GAP_TIMEOUT to arrive, then it is
// cancelled; a failure (status, timeout, size, no number) is logged,
// counted (labels.GapResyncFailed) and the gap goes to TETHER_GAP_POLICY. A snapshot that
// arrives after its gap ended otherwise is not used.

// SnapshotRequest is one snapshot of Stream, in the server's session
// Session (the latest captured id, "" before any).
type SnapshotRequest struct {
	Stream  string
	Session string
	// Deadline, in the Config's Clock, is when the snapshot stops being
	// waited for: the gap goes to the policy then.
	Deadline time.Time
}

// Snapshot is a stream's state as a snapshot gives it: the message for the
// app, and the number the stream resets to.
type Snapshot struct {
	Data []byte
	Seq  int64
}

// SnapshotFunc fetches the snapshot of a stream. It runs in a goroutine of
// its own and must return once ctx ends: when the gap ended without it, or
// the Sequencer stops.
type SnapshotFunc func(ctx context.Context, r SnapshotRequest) (Snapshot, error)

// snapshotJob is one snapshot being fetched for gt.
type snapshotJob struct {
	gt     *gapTrack
	req    SnapshotRequest
	ctx    context.Context
	cancel context.CancelFunc
	// late: the deadline passed and the fetch was cancelled; its end is
	// the failure, which says what the last attempt met (a 500, a hung
	// answer) rather than only that time ran out.
	late bool
}

// whyResyncFailed is the reason a gap is given up after its snapshot failed.
const whyResyncFailed = "no snapshot from TETHER_RESYNC_URL"

// errSnapshotLate is a snapshot not answered within TETHER_GAP_TIMEOUT.
var errSnapshotLate = errors.New("no snapshot within TETHER_GAP_TIMEOUT")

// snapshotLocked starts the snapshot of gt's stream, unless one is under
// way: the gap timer now times the snapshot, and no catch-up is made
// meanwhile. It reports whether a snapshot is under way; false without
// Config.Snapshot. mu is held.
func (s *Sequencer) snapshotLocked(b *batch, gt *gapTrack) bool {
	if s.cfg.Snapshot == nil || s.closed || s.failed {
		return false
	}
	if gt.snapshot != nil {
		return true
	}
	if gt.fetching != nil {
		// Its answer is not waited for any more, and its end, cancelled,
		// is no failure to report (fetchDoneLocked).
		gt.fetching.cancel()
		gt.fetching = nil
	}
	gt.deferred, gt.hasPending, gt.fetchFailed = false, false, true
	s.episodes++
	gt.episode = s.episodes
	s.armLocked(gt, s.cfg.GapTimeout)
	ctx, cancel := context.WithCancel(s.fetchContextLocked())
	j := &snapshotJob{gt: gt, ctx: ctx, cancel: cancel, req: SnapshotRequest{
		Stream: gt.name, Session: s.session, Deadline: s.clock.Now().Add(s.cfg.GapTimeout),
	}}
	gt.snapshot = j
	s.wg.Add(1) // Done by snapshot, which finish starts
	b.snapshots = append(b.snapshots, j)
	b.event(event{kind: evSnapshotAsked, stream: gt.name})
	return true
}

// snapshot runs one snapshot fetch in its own goroutine and applies what
// it got.
func (s *Sequencer) snapshot(j *snapshotJob) {
	defer s.wg.Done()
	defer j.cancel()
	snap, err := s.cfg.Snapshot(j.ctx, j.req)
	s.turn.Lock()
	defer s.turn.Unlock()
	b := s.batch.reset()
	s.mu.Lock()
	s.snapshotDoneLocked(b, j, snap, err)
	s.noteHeldLocked(b)
	s.mu.Unlock()
	s.finish(b, true)
}

// snapshotDoneLocked applies a snapshot's answer, unless its gap ended
// meanwhile (filled, given up, the snapshot timed out) or the Sequencer is
// stopping: the stream is reset to it, or the gap is given up.
func (s *Sequencer) snapshotDoneLocked(b *batch, j *snapshotJob, snap Snapshot, err error) {
	gt := j.gt
	if gt.snapshot != j || s.gaps[gt.name] != gt || s.closed || s.failed {
		return
	}
	gt.snapshot = nil
	if j.late {
		// An answer that raced the deadline is not used either: the
		// catch-ups' rule (errLate).
		err = lateSnapshot(err)
	}
	if err != nil {
		s.snapshotFailedLocked(b, gt, err)
		return
	}
	m := buffer.SeqMessage{Message: buffer.Message{Data: snap.Data}}
	m.Seq, m.First = snap.Seq, snap.Seq
	dropped := s.resyncLocked(b, gt.name, m, source{http: true})
	if dropped > 0 {
		// Held messages the snapshot covers: the app has them in it.
		s.dups.n += dropped
		b.event(event{kind: evStale, n: dropped})
	}
}

// lateSnapshot is the failure of a snapshot cancelled at its deadline,
// with what ended its last attempt.
func lateSnapshot(err error) error {
	if err == nil {
		return errSnapshotLate
	}
	return fmt.Errorf("%w: %w", errSnapshotLate, err)
}

// snapshotLateLocked ends gt's snapshot at its deadline: it is cancelled,
// and its goroutine, which must return once its context ends
// (SnapshotFunc), reports the failure and gives the gap to the policy.
func (s *Sequencer) snapshotLateLocked(gt *gapTrack) {
	gt.snapshot.late = true
	gt.snapshot.cancel()
}

// snapshotFailedLocked reports a snapshot that failed or did not come in
// time, and gives the gap up under the policy.
func (s *Sequencer) snapshotFailedLocked(b *batch, gt *gapTrack, err error) {
	gt.stopSnapshot()
	g, open := s.tracker.Gap(gt.name)
	if !open {
		return
	}
	b.event(event{kind: evSnapshotFailed, stream: gt.name, from: g.From, to: g.To, outcome: labels.GapResyncFailed, err: err})
	s.giveUpLocked(b, g, whyResyncFailed)
}

// stopSnapshot ends gt's snapshot, whose answer is not wanted any more.
func (gt *gapTrack) stopSnapshot() {
	if gt.snapshot != nil {
		gt.snapshot.cancel()
		gt.snapshot = nil
	}
}

// startSnapshots starts the snapshots snapshotLocked registered with wg.
func (s *Sequencer) startSnapshots(b *batch) {
	for _, j := range b.snapshots {
		go s.snapshot(j)
	}
}

// HTTPSnapshot is the SnapshotFunc of TETHER_RESYNC_URL: url rendered for
// the request, fetched with c (the client of TETHER_GAPFILL_URL: the same
// credentials and limits) until the request's deadline, retrying transient
// failures with fetchBackoff(gapTimeout); seqOf reads the number the
// stream resets to (TETHER_RESYNC_SEQ_PATH) and says what is wrong when
// there is none. The deadline is read as wall-clock time: HTTPSnapshot
// goes with the System clock.
func HTTPSnapshot(c *gapfill.Client, url template.ResyncURL, gapTimeout time.Duration, seqOf func([]byte) (int64, error)) SnapshotFunc {
	backoff := fetchBackoff(gapTimeout)
	return func(ctx context.Context, r SnapshotRequest) (Snapshot, error) {
		ctx, cancel := context.WithDeadline(ctx, r.Deadline)
		defer cancel()
		u, err := url.Render(template.Snapshot{Stream: r.Stream, Session: r.Session})
		if err != nil {
			return Snapshot{}, err
		}
		data, err := c.FetchDocumentRetry(ctx, u, backoff)
		if err != nil {
			return Snapshot{}, err
		}
		seq, err := seqOf(data)
		if err != nil {
			return Snapshot{}, err
		}
		return Snapshot{Data: data, Seq: seq}, nil
	}
}
