package demo

import (
	"encoding/json"
	"sync"
	"time"
)

// appMinPause is the shortest silence between two events after which the
// app remarks that they flow again: shorter than the outages that matter
// (a stall, a refused reconnect), longer than the gap between two events at
// any rate but the slowest.
const appMinPause = 800 * time.Millisecond

// appStats is what an app saw.
type appStats struct {
	events, gaps, missed, duplicates, late int64
	snapshots                              int64  // the stream restarted from a snapshot
	notices, announced                     int64  // gap notices, and the events they said were lost
	tetherGaps                             int64  // SSE tether-gap events: tether could not resume the app's own stream
	keepAlives                             int64  // SSE ": keep-alive" comments from tether
	welcomes, acks, other                  int64  // the feed's welcomes and answers, and messages the app did not expect
	requests                               int    // SSE requests made: 1 while the first stream lasts
	ends                                   int    // connections that ended without the app asking
	endedBy                                string // why, for the first such end
	gaveUp                                 string // why the app failed for good; "" while it has not
	lastSeq                                int64  // the highest seq received
	lastID                                 string // SSE: the stream's last event ID
}

// feedMessage is the union of the feed's messages an app reads.
type feedMessage struct {
	T    string `json:"t"`
	Seq  int64  `json:"seq"`
	At   int64  `json:"at"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
}

// ledger is an app's account of what it received, kept the way a careful
// app would to notice what an outage cost it, and narrated when it is news.
// Behind tether a gap, a duplicate or a late event is a bug: tether fills
// gaps, drops duplicates and holds what comes early. A snapshot and an
// announced gap are the feed's and tether's honest answers when history ran
// out. Safe for concurrent use; it never narrates under its mutex.
type ledger struct {
	narr  *narrator
	quiet time.Duration // a pause between events worth remarking on

	mu        sync.Mutex
	track     tracker
	stats     appStats
	lastEvent time.Time // when the latest new event arrived
	heardKeep bool      // the first keep-alive was narrated
	waiters   []waiter  // reached's channels not closed yet
}

// waiter is a channel reached returned, closed once the stream is at seq.
type waiter struct {
	seq int64
	ch  chan struct{}
}

func newLedger(n *narrator, rate int) *ledger {
	return &ledger{narr: n, quiet: max(appMinPause, 3*time.Second/time.Duration(max(rate, 1)))}
}

// say narrates about the app.
func (l *ledger) say(format string, args ...any) { l.narr.say(l.narr.words.app, format, args...) }

// Stats returns a snapshot of what the app saw.
func (l *ledger) Stats() appStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, t := l.stats, &l.track
	s.events, s.gaps, s.missed, s.duplicates, s.late = t.events, t.gaps, t.missed, t.duplicates, t.late
	s.snapshots, s.announced, s.lastSeq = t.snapshots, t.announced, t.last
	return s
}

// reached returns a channel closed once the app's stream has come to
// event seq: it holds every event up to seq, or a snapshot or a gap notice
// stood in for the ones it lacks. tether delivers in order, so an app past
// a fault's first lost event has seen tether repair it; the fault schedule
// and the demo's end go by this, not by the clock, so that a loaded machine
// slows the story down instead of cutting it short.
func (l *ledger) reached(seq int64) <-chan struct{} {
	ch := make(chan struct{})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.track.started && l.track.last >= seq {
		close(ch)
		return ch
	}
	l.waiters = append(l.waiters, waiter{seq, ch})
	return ch
}

// wakeLocked closes the channels of the waiters the stream has reached.
// l.mu is held; closing a channel never blocks.
func (l *ledger) wakeLocked() {
	kept := l.waiters[:0]
	for _, w := range l.waiters {
		if l.track.last >= w.seq {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(l.waiters[len(kept):])
	l.waiters = kept
}

// message accounts for one of the feed's messages as the app received it;
// id is its event ID, "" when the transport has none.
func (l *ledger) message(data []byte, id string) {
	var m feedMessage
	_ = json.Unmarshal(data, &m) // anything unparsable counts as "other"
	now := l.narr.now()
	l.mu.Lock()
	if id != "" {
		l.stats.lastID = id
	}
	var news func()
	switch m.T {
	case "event":
		news = l.eventLocked(m.Seq, id, now)
	case "snapshot":
		o := l.track.resync(m.At)
		l.lastEvent = now
		news = func() { l.snapshot(m.At, o.gap) }
	case "gap":
		l.stats.notices++
		l.track.announce(m.From, m.To)
		l.lastEvent = now
		news = func() {
			l.say("tether says events %d–%d are lost for good (gap notice); %s reads on", m.From, m.To, l.narr.words.appName())
		}
	case "welcome":
		l.stats.welcomes++
	case "subscribed", "ack":
		l.stats.acks++
	default:
		l.stats.other++
	}
	l.wakeLocked()
	l.mu.Unlock()
	if news != nil {
		news()
	}
}

// eventLocked tracks one event's number and returns what to narrate: the
// first event, events flowing again after a pause, or (behind tether,
// bugs) a gap, a duplicate, an event out of order. l.mu is held.
func (l *ledger) eventLocked(seq int64, id string, now time.Time) func() {
	pause := now.Sub(l.lastEvent)
	o := l.track.observe(seq)
	if o.kind == seqFirst || o.kind == seqNext || o.kind == seqGap {
		l.lastEvent = now
	}
	w := l.narr.words
	switch {
	case o.kind == seqFirst && id != "":
		return func() {
			l.say("first event: seq %d, with tether's id %s (the session's token, a dash, "+
				"its event count: what the app would send back as Last-Event-ID)", seq, id)
		}
	case o.kind == seqFirst:
		return func() { l.say("first event: seq %d", seq) }
	case o.kind == seqNext && pause >= l.quiet:
		return func() {
			l.say("events flow again after %.1fs of quiet: %d follows %d, nothing lost, nothing twice; %s's %s never closed",
				pause.Seconds(), seq, o.last, w.appName(), w.conn)
		}
	case o.kind == seqGap:
		return func() {
			l.say("!!! %s: %s missing without notice; tether should have filled it or said so",
				gapName(o.gap), plural(o.gap.len(), "event", "events"))
		}
	case o.kind == seqDuplicate:
		return func() { l.say("!!! duplicate: event %d arrived again (after %d)", seq, o.last) }
	case o.kind == seqLate:
		return func() { l.say("!!! out of order: event %d arrived after %d", seq, o.last) }
	}
	return nil
}

// snapshot narrates a snapshot at event at; gap is what it stood in for.
func (l *ledger) snapshot(at int64, gap span) {
	name := l.narr.words.appName()
	if gap.from > 0 {
		l.say("snapshot at event %d: the feed could no longer replay events %d–%d, "+
			"so %s takes its state from the snapshot and reads on from %d", at, gap.from, gap.to, name, at+1)
		return
	}
	l.say("snapshot at event %d: %s takes its state from it", at, name)
}

// tetherEvent accounts for an event tether itself sent (an SSE event type
// other than the feed's), or one the app does not know.
func (l *ledger) tetherEvent(typ, data string) {
	l.mu.Lock()
	switch typ {
	case "tether-gap":
		l.stats.tetherGaps++
	case "tether-close":
	default:
		l.stats.other++
	}
	l.mu.Unlock()
	switch typ {
	case "tether-gap":
		l.say("!!! tether-gap event %s: tether could not resume the app's own stream", data)
	case "tether-close":
		l.say("!!! tether-close event %s: tether is ending the app's stream", data)
	}
}

// keepAlive counts a keep-alive comment, and explains the first.
func (l *ledger) keepAlive() {
	l.mu.Lock()
	l.stats.keepAlives++
	first := !l.heardKeep
	l.heardKeep = true
	l.mu.Unlock()
	if first {
		l.say("no event for a while, but the stream is open: tether writes \": keep-alive\" comments " +
			"(EventSource ignores them; proxies on the way see a live stream)")
	}
}

// setLastID records the stream's last event ID.
func (l *ledger) setLastID(id string) {
	l.mu.Lock()
	l.stats.lastID = id
	l.mu.Unlock()
}

// ended counts a connection that ended without the app asking, and
// returns the last event ID to resume from.
func (l *ledger) ended(why string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.ends++
	if l.stats.endedBy == "" {
		l.stats.endedBy = why
	}
	return l.stats.lastID
}

// requested counts a request for the stream and returns the last event ID
// to send with it.
func (l *ledger) requested() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.requests++
	return l.stats.lastID
}

// failed records why the app gave up for good.
func (l *ledger) failed(why string) {
	l.mu.Lock()
	l.stats.gaveUp = why
	l.mu.Unlock()
}
