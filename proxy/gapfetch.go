package proxy

import (
	"context"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/template"
)

// fetchJob is one HTTP catch-up (TETHER_GAPFILL_URL) of a gap's numbers.
type fetchJob struct {
	gt      *gapTrack
	gap     buffer.Gap
	session string
	ctx     context.Context
	cancel  context.CancelFunc
}

// requestLocked asks TETHER_GAPFILL_URL for the numbers of g not asked for
// yet and not delivered since; the fetch starts when the batch is flushed.
// While a fetch is in flight, or the gap is left to a resumed replay, g
// waits in gt.pending. sess.mu is held.
func (sess *Session) requestLocked(b *seqBatch, gt *gapTrack, g buffer.Gap) {
	r := &sess.srv.rules.seq
	sq := &sess.seq
	if !r.fill || sq.closed || sq.failed || gt.fetchFailed {
		return
	}
	if gt.deferred || gt.fetching != nil {
		gt.addPending(g)
		return
	}
	last, _ := sq.tracker.Last(gt.name)
	from := max(g.From, gt.requested+1, last+1)
	if from > g.To {
		return
	}
	// A fetch has until the gap's deadline to succeed. One started late in
	// it, for a hole found after the gap was timed, gets a timeout of its
	// own: that hole will be timed in full once it is the first.
	deadline := gt.deadline
	if time.Until(deadline) < r.GapTimeout/4 {
		deadline = time.Now().Add(r.GapTimeout)
	}
	ctx, cancel := context.WithDeadline(sess.ctx, deadline)
	j := &fetchJob{gt: gt, gap: buffer.Gap{Stream: gt.name, From: from, To: g.To}, session: sq.session, ctx: ctx, cancel: cancel}
	gt.fetching, gt.requested = j, g.To
	sq.wg.Add(1) // Done by fetch, which flush starts
	b.fetches = append(b.fetches, j)
}

// fetch runs one catch-up in its own goroutine and feeds what it got to the
// tracker, as if it came from the upstream: a partial answer fills what it
// can, and the gap timeout settles the rest.
func (sess *Session) fetch(j *fetchJob) {
	defer sess.seq.wg.Done()
	defer j.cancel()
	r := &sess.srv.rules.seq
	url, err := r.GapFillURL.Render(template.Gap{Stream: j.gap.Stream, From: j.gap.From, To: j.gap.To, Session: j.session})
	var msgs [][]byte
	if err == nil {
		msgs, err = r.GapFill.FetchRetry(j.ctx, url, r.fetchBackoff)
	}
	sess.fetched(j, msgs, err)
}

// fetched sequences the messages of an answer, in order, holding the turn
// for all of them so that nothing interleaves.
func (sess *Session) fetched(j *fetchJob, msgs [][]byte, err error) {
	sq := &sess.seq
	sq.turn.Lock()
	defer sq.turn.Unlock()
	b := sq.batch.reset()
	rs := &sess.srv.rules
	for _, m := range msgs {
		hidden := rs.upstream && sess.hidden(nil, m)
		in := rs.seq.classify(m)
		sess.mu.Lock()
		sess.sequenceLocked(b, seqSource{http: true}, ws.OpText, m, hidden, in)
		sess.mu.Unlock()
	}
	sess.mu.Lock()
	sess.fetchDoneLocked(b, j, len(msgs), err)
	sess.heldLocked(b)
	sess.mu.Unlock()
	sess.flush(b)
}

// fetchDoneLocked records the end of a fetch: a failure is reported (when
// the gap still waits for it) and stops fetching until the next gap is
// timed; a success starts the fetch of the holes found meanwhile.
func (sess *Session) fetchDoneLocked(b *seqBatch, j *fetchJob, n int, err error) {
	sq := &sess.seq
	gt := j.gt
	if gt.fetching == j {
		gt.fetching = nil
	}
	if sq.gaps[gt.name] != gt || sq.closed || sq.failed {
		return // filled meanwhile, or the session is ending
	}
	if err != nil {
		gt.fetchFailed, gt.hasPending = true, false
		gt.requested, _ = sq.tracker.Last(gt.name)
		b.event(seqEvent{kind: evFetchFailed, stream: gt.name, from: j.gap.From, to: j.gap.To, err: err})
		return
	}
	b.event(seqEvent{kind: evFetched, stream: gt.name, from: j.gap.From, to: j.gap.To, n: n})
	if gt.hasPending {
		p := gt.pending
		gt.hasPending = false
		sess.requestLocked(b, gt, p)
	}
}
