package sequence

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
)

// Sequencer is one session's sequencing (docs/design.md "Sequences and gap
// filling"): the tracker and hold buffer, the server's session id, the gaps
// being timed and fetched, and the streams a resume asked for. See the
// package documentation for its concurrency contract.
type Sequencer struct {
	cfg      Config
	app      App
	classify func([]byte) (Fields, bool)
	log      *zap.Logger
	metrics  Metrics
	clock    Clock
	meter    buffer.Meter    // the held bytes' account, nil for none
	parent   context.Context // the session's

	// turn orders the deliveries. Three kinds of goroutine deliver: the
	// upstream reader, a gap timer applying the policy, and a fetch feeding
	// what it got. Each runs the tracker under mu and delivers what it
	// released after unlocking, so mu is never held across a send to the
	// app. That alone would let two of them deliver out of order (the
	// reader takes 5 and 6 from the tracker, a timer then takes 8 and 9
	// and sends them first), so each also holds turn from its first
	// tracker call until the last of its messages is queued on the app:
	// output leaves in the order the tracker produced it. turn is always
	// taken before mu, and only the app can block its holder, which is the
	// back-pressure the upstream reader is meant to feel anyway.
	//
	// The upstream reader keeps the turn from the first message of a burst
	// it read in one go until its Flush, before it waits for the socket:
	// one lock per burst rather than per message. A timer or a fetch waits
	// for the burst, which the reader is processing as fast as the app
	// takes it.
	turn       sync.Mutex
	readerTurn bool  // the upstream reader holds turn; only the reader touches it
	batch      batch // the output of the turn's holder

	mu      sync.Mutex      // guards everything below but wg
	tracker *buffer.Tracker // nil until the first message (trackerLocked)
	// ctx is the fetches' parent, a child of parent made with the first
	// fetch or snapshot (fetchContextLocked); Stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	// session is the latest captured session id, sessionGen the connection
	// it came from and prevSession the one captured before that connection:
	// what a resume on connection sessionGen asks for (resume.go).
	session, prevSession string
	sessionGen           uint64
	// gaps, streams and resumed are nil until their first entry.
	gaps     map[string]*gapTrack // streams with held messages
	streams  map[string]*streamState
	hot      *streamState      // the stream knownLocked found last
	resumed  map[string]uint64 // stream → connection whose restore asked to resume it, until answered
	episodes uint64            // numbers gap timeouts, so a stale timer knows it
	held     int               // held bytes last reported to Metrics
	dups     dupReport
	fillable bool           // a resume, a catch-up or a resync may fill a gap across a reconnect
	failed   bool           // the close policy closed the app: nothing more is delivered
	closed   bool           // Stop was called: no new timer callback or fetch
	wg       sync.WaitGroup // timer callbacks and fetches under way
}

// New returns the Sequencer of one session. ctx is the session's: its end
// cancels the fetches, as Stop does. It panics without an App, or with a
// Fetch and no Classify: wiring errors, not configuration ones.
func New(ctx context.Context, opts Options) *Sequencer {
	if opts.App == nil {
		panic("sequence: Options.App is required")
	}
	if opts.Fetch != nil && opts.Classify == nil {
		panic("sequence: Options.Classify is required with Options.Fetch")
	}
	cfg := opts.Config.withDefaults()
	s := &Sequencer{
		cfg:      cfg,
		app:      opts.App,
		classify: opts.Classify,
		log:      opts.Log,
		metrics:  opts.Metrics,
		clock:    cfg.Clock,
		meter:    opts.Meter,
		parent:   ctx,
		fillable: cfg.Resume.IsSet() || cfg.Fetch != nil || cfg.Resyncs,
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.metrics == nil {
		s.metrics = nopMetrics{}
	}
	return s
}

// trackerLocked returns the tracker, made with the first message: most of
// a server's sessions may sit idle, and an idle one should not pay for
// sequencing it never does (nor for its maps and the fetches' context,
// also made on first use). Only what a message reaches needs it; the
// readers that may come first (resumeDataLocked, Position) take a nil
// tracker for one that has seen nothing.
func (s *Sequencer) trackerLocked() *buffer.Tracker {
	if s.tracker == nil {
		s.tracker = buffer.NewModelTracker(s.cfg.HoldMaxBytes, s.cfg.Model)
		if s.meter != nil {
			s.tracker.SetMeter(s.meter)
		}
	}
	return s.tracker
}

// lastLocked is the tracker's Last, for a reader that may come before the
// first message.
func (s *Sequencer) lastLocked(stream string) (int64, bool) {
	if s.tracker == nil {
		return 0, false
	}
	return s.tracker.Last(stream)
}

// fetchContextLocked is the parent of the fetches and snapshots, made with
// the first of them; Stop cancels it. Not called once closed.
func (s *Sequencer) fetchContextLocked() context.Context {
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(s.parent)
	}
	return s.ctx
}

// source is where a sequenced message came from: the upstream connection
// with that generation, or an HTTP catch-up (gen 0, which no connection
// has).
type source struct {
	gen  uint64
	http bool
}

// Offer sequences one message the upstream reader read on connection gen,
// in the order docs/design.md gives: session capture and resync, then the
// duplicate and gap check. hidden is the session's hiding rules' verdict,
// applied to what the tracker releases, so a held hidden message stays
// hidden when it is released; a message without a number passes through.
// msg.Data is only read during the call.
//
// Only the upstream reader calls Offer: it takes the delivery turn and
// keeps it, and the messages App.Deliver may batch, until its Flush.
func (s *Sequencer) Offer(gen uint64, msg buffer.Message, hidden bool, f Fields) {
	s.takeReaderTurn()
	b := s.batch.reset()
	s.mu.Lock()
	if !s.inOrderLocked(b, gen, msg, hidden, &f) {
		s.sequenceLocked(b, source{gen: gen}, msg, hidden, f)
		s.noteHeldLocked(b)
	}
	s.mu.Unlock()
	s.finish(b, false)
}

// inOrderLocked is sequenceLocked for the message nearly every Offer
// brings: numbered, of a stream already seen on the same connection, in
// the same epoch, while no stream holds messages, no resume waits for its
// answer and no duplicate waits to be reported. Then nothing but the
// tracker has anything to do (the resets, the gap bookkeeping, the
// recoveries and the duplicate lines all start from one of those
// conditions), and when the tracker delivers the message, held bytes and
// stale counts cannot have changed either. It reports false, having done
// nothing, for any other message; a message the tracker does not deliver
// (a duplicate, the start of a gap) goes on to offerLocked's handling of
// the verdict. mu and turn are held.
func (s *Sequencer) inOrderLocked(b *batch, gen uint64, msg buffer.Message, hidden bool, f *Fields) bool {
	if !f.HasSeq || f.Captured || f.Resync || s.failed || len(s.gaps) > 0 || len(s.resumed) > 0 || s.dups.n > 0 {
		return false
	}
	st := s.knownLocked(f.Stream)
	if st == nil || st.gen != gen || st.newEpoch || (f.Epoch != "" && f.Epoch != st.epoch) {
		return false
	}
	first, ok := s.firstOf(f)
	if !ok {
		return false
	}
	m := buffer.SeqMessage{Seq: f.Seq, First: first, Message: msg, Hidden: hidden, EventID: f.EventID}
	if s.cfg.EventIDs && m.EventID == "" && !hidden {
		m.EventID = EventID(f.Stream, f.Seq)
	}
	res := s.tracker.Offer(f.Stream, m, b.collect)
	if res.Verdict != buffer.Delivered {
		s.offeredLocked(b, f.Stream, m, source{gen: gen}, false, res)
		s.noteHeldLocked(b)
	}
	return true
}

// Flush passes on what Offer left in the App's batch and gives the delivery
// turn up. The upstream reader calls it before any read that may wait, and
// before it stops, so gap timers and fetches wait for at most one burst.
func (s *Sequencer) Flush() {
	s.takeReaderTurn()
	s.app.Flush()
	s.readerTurn = false
	s.turn.Unlock()
}

// takeReaderTurn takes turn for the upstream reader, unless it holds it
// already.
func (s *Sequencer) takeReaderTurn() {
	if !s.readerTurn {
		s.turn.Lock()
		s.readerTurn = true
	}
}

// Stop ends the sequencing once the upstream reader is gone: timers stop,
// fetches are cancelled, and it waits for the callbacks and fetches under
// way. The bytes still held leave the gauge, and the duplicates not
// surfaced yet are. Nothing is delivered after Stop returns.
func (s *Sequencer) Stop() {
	s.mu.Lock()
	s.closed = true
	for _, gt := range s.gaps {
		gt.stop()
	}
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.wg.Wait()
	b := &batch{}
	s.mu.Lock()
	b.heldDelta = -s.held
	s.held = 0
	if n := s.dups.take(s.clock.Now()); n > 0 {
		b.event(event{kind: evDuplicates, n: n})
	}
	s.mu.Unlock()
	s.emit(b)
}

// sequenceLocked applies the tracker to one message. mu and turn are held.
func (s *Sequencer) sequenceLocked(b *batch, src source, msg buffer.Message, hidden bool, f Fields) {
	s.trackerLocked()
	if s.failed {
		return
	}
	if f.Captured {
		s.captureLocked(src.gen, f.Session)
	}
	m := buffer.SeqMessage{Message: msg, Hidden: hidden, EventID: f.EventID}
	if s.cfg.EventIDs && m.EventID == "" && !hidden {
		switch {
		case f.Resync:
			m.EventID = EventID(f.Stream, f.ResyncSeq)
		case f.HasSeq:
			m.EventID = EventID(f.Stream, f.Seq)
		}
	}
	switch {
	case f.Resync:
		m.Seq = f.ResyncSeq
		s.resyncLocked(b, f.Stream, m, src)
	case f.HasSeq:
		s.numberedLocked(b, src, m, f)
	default:
		if f.Epoch != "" {
			s.unnumberedEpochLocked(f)
		}
		b.out = append(b.out, m)
	}
}

// offerLocked sequences a numbered message; fresh: the stream's first on
// its connection.
func (s *Sequencer) offerLocked(b *batch, stream string, m buffer.SeqMessage, src source, fresh bool) {
	s.offeredLocked(b, stream, m, src, fresh, s.tracker.Offer(stream, m, b.collect))
}

// offeredLocked acts on the tracker's verdict res on m.
func (s *Sequencer) offeredLocked(b *batch, stream string, m buffer.SeqMessage, src source, fresh bool, res buffer.OfferResult) {
	for res.Verdict == buffer.HoldFull {
		// No room to wait for the gap: the policy decides now, as if it
		// had timed out (buffer.Tracker.Offer).
		why := whyHoldFull
		if res.Refused {
			why = whyBudgetFull
		}
		if !s.giveUpLocked(b, res.Gap, why) {
			return
		}
		res = s.tracker.Offer(stream, m, b.collect)
	}
	// A gap across a reconnect that no resume, catch-up or resync can
	// fill: waiting TETHER_GAP_TIMEOUT would only stall the stream, so a
	// snapshot is fetched now, or without one the policy decides now. (On
	// a live connection the live stream may still fill it: a reordering.)
	unfillable := res.Verdict == buffer.Held && fresh && !s.fillable
	if unfillable && s.cfg.Snapshot == nil {
		s.giveUpLocked(b, res.Gap, whyUnfillable)
		return
	}
	switch res.Verdict {
	case buffer.Duplicate:
		b.event(event{kind: evDuplicate, stream: stream, seq: m.Seq, gen: src.gen})
		// A burst of duplicates is summed up by the next delivered
		// message; a stream that only repeats itself (a counter that
		// started over) gets its line once the oldest uncounted
		// duplicate is a second old, not never.
		if n := s.dups.dropped(s.clock.Now()); n > 0 {
			b.event(event{kind: evDuplicates, n: n})
		}
		return
	case buffer.Delivered:
		if s.dups.n > 0 {
			if n := s.dups.due(s.clock.Now()); n > 0 {
				b.event(event{kind: evDuplicates, n: n})
			}
		}
	}
	method := s.methodLocked(stream, src)
	if res.Verdict == buffer.Held || len(s.gaps) > 0 {
		var held span
		if res.Verdict == buffer.Held {
			held = span{first: m.Seq, last: m.Seq}
			if s.cfg.Model == buffer.ModelRange || s.cfg.Model == buffer.ModelChain {
				held.first = m.First
			}
		}
		s.trackLocked(b, stream, held, gapCause{outcome: labels.GapFilled, method: method}, s.clock.Now())
	}
	if unfillable {
		if gt := s.gaps[stream]; gt != nil {
			s.snapshotLocked(b, gt)
		}
	}
	// Otherwise the message was delivered in order with no gap open in any
	// stream: there is nothing to time or end, and the clock, the one
	// costly call left on this path, is not read. (Every stream holding
	// messages has a track in s.gaps: trackLocked opens one for each held
	// message, so a delivered message with none cannot have left a gap.)
	if res.Verdict == buffer.Delivered {
		s.answeredLocked(b, stream, src, method)
	}
}

// methodLocked names how a message of stream reached tether, for the
// recovery it may complete: "http", "resume" (from the connection a resume
// for the stream was sent on), or "" for the live stream.
func (s *Sequencer) methodLocked(stream string, src source) string {
	switch {
	case src.http:
		return labels.RecoveryHTTP
	case src.gen != 0 && s.resumed[stream] == src.gen:
		return labels.RecoveryResume
	}
	return ""
}

// answeredLocked settles a resume once the connection it was sent on
// delivers a message of its stream. With no gap left, the stream carried on
// where it stopped: that is a recovery by resume. With a gap open, the
// recovery is counted when the gap closes (gap.go).
func (s *Sequencer) answeredLocked(b *batch, stream string, src source, method string) {
	if method != labels.RecoveryResume || s.resumed[stream] != src.gen {
		return // not a resumed stream, or a gap's fill counted it already
	}
	if _, open := s.gaps[stream]; open {
		return
	}
	delete(s.resumed, stream)
	last, _ := s.tracker.Last(stream)
	b.event(event{kind: evResumed, stream: stream, seq: last, gen: src.gen})
}

// resyncLocked resets a stream to a snapshot's number (TETHER_RESYNC_MATCH,
// TETHER_RESYNC_URL) and returns how many held messages it covered.
func (s *Sequencer) resyncLocked(b *batch, stream string, m buffer.SeqMessage, src source) int {
	_, known := s.tracker.Last(stream)
	dropped := s.tracker.Resync(stream, m, b.collect)
	delete(s.resumed, stream) // the server answered the resume with a snapshot
	b.event(event{kind: evResynced, stream: stream, seq: m.Seq, n: dropped, gen: src.gen, known: known})
	s.trackLocked(b, stream, span{}, gapCause{outcome: labels.GapResync, method: labels.RecoveryResync, force: true}, s.clock.Now())
	return dropped
}

// noteHeldLocked notes the change of held bytes since the last report, and
// the held messages the tracker dropped as stale meanwhile (a delivered
// range covered them), which count as duplicates.
func (s *Sequencer) noteHeldLocked(b *batch) {
	if n := s.tracker.TakeStale(); n > 0 {
		s.dups.n += n
		b.event(event{kind: evStale, n: n})
	}
	now := s.tracker.HeldBytes()
	b.heldDelta += now - s.held
	s.held = now
}

// finish acts on a batch once mu is released, the turn still held: it
// starts the fetches, passes the messages on to the app in order, then the
// close the policy asked for, and writes the logs and metrics. With queue,
// or before a close, the App's batch is flushed too; without, the messages
// may stay there until the upstream reader's Flush.
func (s *Sequencer) finish(b *batch, queue bool) {
	s.startFetches(b)
	s.startSnapshots(b)
	s.deliver(b)
	if queue || b.closeErr != nil {
		s.app.Flush()
	}
	if b.closeErr != nil {
		s.app.Close(CloseUnrecoverable, b.closeErr.Error())
	}
	s.emit(b)
}

// deliver passes the batch's messages on to the app, without the hidden
// ones, which updated the sequencing only.
func (s *Sequencer) deliver(b *batch) {
	out := b.out[:0]
	for _, m := range b.out {
		if !m.Hidden {
			out = append(out, m)
		}
	}
	if len(out) > 0 {
		s.app.Deliver(out)
	}
	clear(b.out) // the App copied the payloads it keeps
	b.out = b.out[:0]
}

// startFetches starts the fetches requestLocked registered with wg.
func (s *Sequencer) startFetches(b *batch) {
	for _, j := range b.fetches {
		go s.fetch(j)
	}
}
