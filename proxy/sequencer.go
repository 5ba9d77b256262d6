package proxy

import (
	"time"

	"github.com/gobwas/ws"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
)

// seqIn is what the sequence rules read in one message.
type seqIn struct {
	seq       int64
	hasSeq    bool
	stream    string // may point into the message
	session   string // may point into the message
	captured  bool   // matches TETHER_SESSION_MATCH and carries an id
	resyncSeq int64
	resync    bool // matches TETHER_RESYNC_MATCH and carries a number
}

// classify reads a message for the sequence rules: every configured path
// in one pass, then the session and resync patterns.
func (r *seqRules) classify(data []byte) seqIn {
	var f [numFields]gjson.Result
	r.fields.read(data, &f)
	var in seqIn
	in.seq, in.hasSeq = seqNumber(f[fieldSeq], r.SeqPath, data)
	in.stream = nameOf(f[fieldStream])
	if r.capture && f[fieldSession].Exists() && r.SessionMatch.Match(data) {
		in.session, in.captured = nameOf(f[fieldSession]), true
	}
	if r.resync && f[fieldResync].Exists() && r.ResyncMatch.Match(data) {
		in.resyncSeq, in.resync = seqNumber(f[fieldResync], r.ResyncSeqPath, data)
	}
	return in
}

// Where a sequenced message came from: the upstream connection with that
// generation, or an HTTP catch-up (gen 0, which no connection has).
type seqSource struct {
	gen  uint64
	http bool
}

// sequenced runs one upstream message through the sequence rules, in the
// order DESIGN.md gives: session capture and resync (state), then the
// duplicate and gap check; hidden is the hiding rules' verdict, applied to
// what the tracker delivers, so a held hidden message stays hidden when it
// is released. A message without a number passes through.
func (sess *Session) sequenced(gen uint64, op ws.OpCode, data []byte, hidden bool) {
	select {
	case <-sess.appReady:
	case <-sess.ctx.Done():
		return
	}
	sq := &sess.seq
	sq.turn.Lock()
	defer sq.turn.Unlock()
	b := sq.batch.reset()
	in := sess.srv.rules.seq.classify(data)
	sess.mu.Lock()
	sess.sequenceLocked(b, seqSource{gen: gen}, op, data, hidden, in)
	sess.heldLocked(b)
	sess.mu.Unlock()
	sess.flush(b)
}

// sequenceLocked applies the tracker to one message. sess.mu and turn are
// held.
func (sess *Session) sequenceLocked(b *seqBatch, src seqSource, op ws.OpCode, data []byte, hidden bool, in seqIn) {
	sq := &sess.seq
	if sq.failed {
		return
	}
	if in.captured {
		sq.capture(src.gen, in.session)
	}
	m := buffer.SeqMessage{Message: buffer.Message{Binary: op == ws.OpBinary, Data: data}, Hidden: hidden}
	switch {
	case in.resync:
		m.Seq = in.resyncSeq
		sess.resyncLocked(b, in.stream, m, src)
	case in.hasSeq:
		m.Seq = in.seq
		sess.offerLocked(b, in.stream, m, src)
	default:
		b.out = append(b.out, m)
	}
}

// offerLocked sequences a numbered message.
func (sess *Session) offerLocked(b *seqBatch, stream string, m buffer.SeqMessage, src seqSource) {
	sq := &sess.seq
	res := sq.tracker.Offer(stream, m, b.collect)
	for res.Verdict == buffer.HoldFull {
		// No room to wait for the gap: the policy decides now, as if it
		// had timed out (buffer.Tracker.Offer).
		if !sess.giveUpLocked(b, res.Gap, whyHoldFull) {
			return
		}
		res = sq.tracker.Offer(stream, m, b.collect)
	}
	now := time.Now()
	switch res.Verdict {
	case buffer.Duplicate:
		sq.dups.n++
		b.event(seqEvent{kind: evDuplicate, stream: stream, seq: m.Seq, gen: src.gen})
		return
	case buffer.Delivered:
		if n := sq.dups.due(now); n > 0 {
			b.event(seqEvent{kind: evDuplicates, n: n})
		}
	}
	held := int64(0)
	if res.Verdict == buffer.Held {
		held = m.Seq
	}
	method := sess.methodLocked(stream, src)
	sess.trackLocked(b, stream, held, gapCause{outcome: GapFilled, method: method}, now)
	if res.Verdict == buffer.Delivered {
		sess.answeredLocked(b, stream, src, method)
	}
}

// methodLocked names how a message of stream reached tether, for the
// recovery it may complete: "http", "resume" (from the connection a resume
// for the stream was sent on), or "" for the live stream.
func (sess *Session) methodLocked(stream string, src seqSource) string {
	switch {
	case src.http:
		return RecoveryHTTP
	case src.gen != 0 && sess.seq.resumed[stream] == src.gen:
		return RecoveryResume
	}
	return ""
}

// answeredLocked settles a resume once the connection it was sent on
// delivers a message of its stream. With no gap left, the stream carried on
// where it stopped: that is a recovery by resume. With a gap open, the
// recovery is counted when the gap closes (gap.go).
func (sess *Session) answeredLocked(b *seqBatch, stream string, src seqSource, method string) {
	sq := &sess.seq
	if method != RecoveryResume || sq.resumed[stream] != src.gen {
		return // not a resumed stream, or a gap's fill counted it already
	}
	if _, open := sq.gaps[stream]; open {
		return
	}
	delete(sq.resumed, stream)
	last, _ := sq.tracker.Last(stream)
	b.event(seqEvent{kind: evResumed, stream: stream, seq: last, gen: src.gen})
}

// resyncLocked resets a stream to a snapshot's number (TETHER_RESYNC_MATCH).
func (sess *Session) resyncLocked(b *seqBatch, stream string, m buffer.SeqMessage, src seqSource) {
	sq := &sess.seq
	_, known := sq.tracker.Last(stream)
	dropped := sq.tracker.Resync(stream, m, b.collect)
	delete(sq.resumed, stream) // the server answered the resume with a snapshot
	b.event(seqEvent{kind: evResynced, stream: stream, seq: m.Seq, n: dropped, gen: src.gen, known: known})
	sess.trackLocked(b, stream, 0, gapCause{outcome: GapResync, method: RecoveryResync, force: true}, time.Now())
}

// heldLocked notes the change of held bytes since the last report.
func (sess *Session) heldLocked(b *seqBatch) {
	sq := &sess.seq
	now := sq.tracker.HeldBytes()
	b.heldDelta += now - sq.held
	sq.held = now
}

// flush delivers a batch after mu is released, the turn still held: the
// app's messages in order, then the close the policy asked for; then it
// starts the fetches and writes the logs and metrics.
func (sess *Session) flush(b *seqBatch) {
	for _, j := range b.fetches {
		go sess.fetch(j)
	}
	sess.deliver(b.out)
	clear(b.out) // the payloads belong to the app socket's queue now
	if b.closeErr != nil {
		sess.closeApp(ws.StatusInternalServerError, b.closeErr.Error())
	}
	sess.emit(b)
}

// deliver queues messages on the app socket, skipping hidden ones.
func (sess *Session) deliver(out []buffer.SeqMessage) {
	for _, m := range out {
		if m.Hidden {
			continue
		}
		op := ws.OpText
		if m.Binary {
			op = ws.OpBinary
		}
		if err := sess.app.Send(sess.ctx, op, m.Data); err != nil {
			sess.log.Debug("upstream message not delivered, app is closing",
				zap.Int("bytes", len(m.Data)), zap.Error(err))
			return
		}
		sess.countMessage(DirectionUpstreamToApp)
	}
}
