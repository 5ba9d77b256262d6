package proxy

import (
	"time"

	"github.com/gobwas/ws"

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
func (r *seqRules) classify(data []byte) seqIn { return r.classifyIn(data, nil) }

// classifyIn is classify for a message whose top level the upstream rules'
// scan read into v (nil when it did not).
func (r *seqRules) classifyIn(data []byte, v *ruleValues) seqIn {
	var f [numFields]fieldValue
	r.fields.readIn(data, v, &f)
	var in seqIn
	in.seq, in.hasSeq = seqNumber(f[fieldSeq], r.SeqPath, data)
	in.stream = nameOf(f[fieldStream])
	if r.capture && f[fieldSession].ok && r.SessionMatch.Match(data) {
		in.session, in.captured = nameOf(f[fieldSession]), true
	}
	if r.resync && f[fieldResync].ok && r.ResyncMatch.Match(data) {
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
// is released; v holds what the upstream rules' scan read, or is nil. A
// message without a number passes through. Only the upstream
// reader calls it: it takes the turn, and keeps it and the messages for the
// app until its Flush.
func (sess *Session) sequenced(gen uint64, op ws.OpCode, data []byte, hidden bool, v *ruleValues) {
	if !sess.waitApp() {
		return
	}
	sq := &sess.seq
	sq.takeReaderTurn()
	b := sq.batch.reset()
	in := sess.srv.rules.seq.classifyIn(data, v)
	sess.mu.Lock()
	sess.sequenceLocked(b, seqSource{gen: gen}, op, data, hidden, in)
	sess.heldLocked(b)
	sess.mu.Unlock()
	sess.finish(b, false)
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
	switch res.Verdict {
	case buffer.Duplicate:
		sq.dups.n++
		b.event(seqEvent{kind: evDuplicate, stream: stream, seq: m.Seq, gen: src.gen})
		return
	case buffer.Delivered:
		if sq.dups.n > 0 {
			if n := sq.dups.due(time.Now()); n > 0 {
				b.event(seqEvent{kind: evDuplicates, n: n})
			}
		}
	}
	method := sess.methodLocked(stream, src)
	if res.Verdict == buffer.Held || len(sq.gaps) > 0 {
		held := int64(0)
		if res.Verdict == buffer.Held {
			held = m.Seq
		}
		sess.trackLocked(b, stream, held, gapCause{outcome: GapFilled, method: method}, time.Now())
	}
	// Otherwise the message was delivered in order with no gap open in any
	// stream: there is nothing to time or end, and the clock, the one
	// costly call left on this path, is not read. (Every stream holding
	// messages has a track in sq.gaps: trackLocked opens one for each held
	// message, so a delivered message with none cannot have left a gap.)
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
// starts the fetches and writes the logs and metrics. Everything for the app
// is queued on its socket before flush returns, the messages the upstream
// reader held back (handler.go) first.
func (sess *Session) flush(b *seqBatch) { sess.finish(b, true) }

// finish is flush, except that without queue the messages may stay in the
// session's batch: the upstream reader passes its own on when it is about to
// wait (Flush). A close the policy asked for queues them all the same, ahead
// of the close frame.
func (sess *Session) finish(b *seqBatch, queue bool) {
	for _, j := range b.fetches {
		go sess.fetch(j)
	}
	sess.deliver(b.out)
	clear(b.out) // the payloads are copied into the batch
	if queue || b.closeErr != nil {
		sess.flushOut()
	}
	if b.closeErr != nil {
		sess.closeApp(ws.StatusInternalServerError, b.closeErr.Error())
	}
	sess.emit(b)
}

// deliver passes messages on to the app, skipping hidden ones.
func (sess *Session) deliver(out []buffer.SeqMessage) {
	for _, m := range out {
		if m.Hidden {
			continue
		}
		op := ws.OpText
		if m.Binary {
			op = ws.OpBinary
		}
		if !sess.send(op, m.Data) {
			return
		}
	}
}
