package sequence

import (
	"context"
	"errors"
	"time"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/gapfill"
	"github.com/tetherproxy/tether/internal/template"
)

// fetchJob is one catch-up (TETHER_GAPFILL_URL) of a gap's numbers.
type fetchJob struct {
	gt     *gapTrack
	req    FetchRequest
	ctx    context.Context
	cancel context.CancelFunc
}

// errLate is a catch-up that answered after its deadline: by then the gap
// timer has handed the gap to the policy, so the answer is not used.
var errLate = errors.New("answered after the gap's deadline")

// requestLocked asks Config.Fetch for the numbers of g not asked for yet
// and not delivered since; the fetch starts when the batch is delivered
// (finish). While a fetch is in flight, or the gap is left to a resumed
// replay, g waits in gt.pending. mu is held.
func (s *Sequencer) requestLocked(b *batch, gt *gapTrack, g buffer.Gap) {
	if s.cfg.Fetch == nil || s.closed || s.failed || gt.fetchFailed {
		return
	}
	if gt.deferred || gt.fetching != nil {
		gt.addPending(g)
		return
	}
	last, _ := s.tracker.Last(gt.name)
	from := max(g.From, gt.requested+1, last+1)
	if from > g.To {
		return
	}
	// A fetch has until the gap's deadline to succeed. One started late in
	// it, for a hole found after the gap was timed, gets a timeout of its
	// own: that hole will be timed in full once it is the first.
	now := s.clock.Now()
	deadline := gt.deadline
	if deadline.Sub(now) < s.cfg.GapTimeout/4 {
		deadline = now.Add(s.cfg.GapTimeout)
	}
	ctx, cancel := context.WithCancel(s.fetchContextLocked())
	j := &fetchJob{gt: gt, ctx: ctx, cancel: cancel, req: FetchRequest{
		Gap: buffer.Gap{Stream: gt.name, From: from, To: g.To}, Session: s.session, Deadline: deadline,
	}}
	gt.fetching, gt.requested = j, g.To
	s.wg.Add(1) // Done by fetch, which finish starts
	b.fetches = append(b.fetches, j)
}

// fetch runs one catch-up in its own goroutine and feeds what it got to the
// tracker, as if it came from the upstream: a partial answer fills what it
// can, and the gap timeout settles the rest.
func (s *Sequencer) fetch(j *fetchJob) {
	defer s.wg.Done()
	defer j.cancel()
	msgs, err := s.cfg.Fetch(j.ctx, j.req)
	if err == nil && !s.clock.Now().Before(j.req.Deadline) {
		msgs, err = nil, errLate
	}
	s.fetched(j, msgs, err)
}

// fetched sequences the messages of an answer, in order, holding the turn
// for all of them so that nothing interleaves.
func (s *Sequencer) fetched(j *fetchJob, msgs [][]byte, err error) {
	s.turn.Lock()
	defer s.turn.Unlock()
	b := s.batch.reset()
	for _, m := range msgs {
		f, hidden := s.classify(m)
		s.mu.Lock()
		s.sequenceLocked(b, source{http: true}, buffer.Message{Data: m}, hidden, f)
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.fetchDoneLocked(b, j, len(msgs), err)
	s.noteHeldLocked(b)
	s.mu.Unlock()
	s.finish(b, true)
}

// fetchDoneLocked records the end of a fetch: a failure is reported (when
// the gap still waits for it) and stops fetching until the next gap is
// timed; a success starts the fetch of the holes found meanwhile.
func (s *Sequencer) fetchDoneLocked(b *batch, j *fetchJob, n int, err error) {
	gt := j.gt
	if gt.fetching != j {
		return // abandoned for a snapshot (snapshotLocked)
	}
	gt.fetching = nil
	if s.gaps[gt.name] != gt || s.closed || s.failed {
		return // filled meanwhile, or the Sequencer is stopping
	}
	if err != nil {
		gt.fetchFailed, gt.hasPending = true, false
		gt.requested, _ = s.tracker.Last(gt.name)
		b.event(event{kind: evFetchFailed, stream: gt.name, from: j.req.Gap.From, to: j.req.Gap.To, err: err})
		// The catch-up cannot fill the gap: a snapshot may.
		s.snapshotLocked(b, gt)
		return
	}
	b.event(event{kind: evFetched, stream: gt.name, from: j.req.Gap.From, to: j.req.Gap.To, n: n})
	if gt.hasPending {
		p := gt.pending
		gt.hasPending = false
		s.requestLocked(b, gt, p)
	}
}

// HTTPFetch is the FetchFunc of TETHER_GAPFILL_URL: url rendered for the
// request, fetched with c until the request's deadline, retrying transient
// failures with fetchBackoff(gapTimeout). The deadline is read as wall-clock
// time: HTTPFetch goes with the System clock.
func HTTPFetch(c *gapfill.Client, url template.GapFillURL, gapTimeout time.Duration) FetchFunc {
	backoff := fetchBackoff(gapTimeout)
	return func(ctx context.Context, r FetchRequest) ([][]byte, error) {
		ctx, cancel := context.WithDeadline(ctx, r.Deadline)
		defer cancel()
		u, err := url.Render(template.Gap{Stream: r.Gap.Stream, From: r.Gap.From, To: r.Gap.To, Session: r.Session})
		if err != nil {
			return nil, err
		}
		return c.FetchRetry(ctx, u, backoff)
	}
}

// fetchBackoff returns the wait before retry n of a catch-up: a tenth of the
// gap timeout, doubling, at most a quarter of it, so a few retries fit in
// the timeout and the last one still has time to be answered.
func fetchBackoff(gapTimeout time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		d := gapTimeout / 10
		for i := 1; i < attempt && d < gapTimeout/4; i++ {
			d *= 2
		}
		return min(d, gapTimeout/4)
	}
}
