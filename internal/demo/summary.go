package demo

import (
	"fmt"
	"strings"
	"time"
)

// header introduces the demo and the settings it runs with.
func (n *narrator) header(o Options) {
	until := "until Ctrl-C"
	if o.Duration > 0 {
		until = fmt.Sprintf("for %s of events (until %s has event %d; Ctrl-C stops it sooner)",
			fmtSetting(o.Duration), n.words.appName(), eventsIn(o.Duration, o.Rate))
	}
	lines := []string{
		n.words.title,
		fmt.Sprintf("  seed %d (-seed %d replays the same faults), a fault every ~%s, %d events/s, %s",
			o.Seed, o.Seed, fmtSetting(o.FaultEvery), o.Rate, until),
	}
	lines = append(lines, n.words.header(n.story.settings)...)
	n.plain(append(lines, "")...)
}

// appLine reads "received 1,204 events, 0 gaps (0 missed), 1 snapshot,
// closes: 0".
func appLine(s appStats, w words) string {
	parts := []string{fmt.Sprintf("received %s, %s (%s missed)", plural(s.events, "event", "events"),
		plural(s.gaps, "gap", "gaps"), fmtCount(s.missed))}
	add := func(n int64, one, many string) {
		if n > 0 {
			parts = append(parts, plural(n, one, many))
		}
	}
	add(s.duplicates, "duplicate", "duplicates")
	add(s.late, "out of order", "out of order")
	add(s.snapshots, "snapshot", "snapshots")
	if s.notices > 0 {
		parts = append(parts, fmt.Sprintf("%s (%s given up)", plural(s.notices, "gap notice", "gap notices"), fmtCount(s.announced)))
	}
	add(s.tetherGaps, "tether-gap event", "tether-gap events")
	add(s.keepAlives, "keep-alive", "keep-alives")
	add(int64(s.requests), "request", "requests")
	return strings.Join(append(parts, fmt.Sprintf("%s: %d", w.ends, s.ends)), ", ")
}

// report is everything the final summary needs.
type report struct {
	elapsed   time.Duration
	seed      uint64
	faults    string // countsLine of the faults injected
	tether    tetherStats
	feed      string // the feed's own line
	published int64  // events the feed numbered
	app       appStats
}

// summary prints the final account.
func (n *narrator) summary(r report) {
	w := n.words
	lines := []string{
		"",
		fmt.Sprintf("summary after %.1fs (seed %d)", r.elapsed.Seconds(), r.seed),
		"  faults   " + r.faults,
		"  tether   " + tetherLine(r.tether, w),
		"  recovery " + recoveryLine(r.tether),
		"  feed     " + r.feed,
		fmt.Sprintf("  %-9s%s%s", w.app, appLine(r.app, w), fromFeed(r.app)),
	}
	if r.app.lastID != "" {
		lines = append(lines, fmt.Sprintf("  %s's last event id: %s (tether's session token and event count)", w.appName(), r.app.lastID))
	}
	lines = append(lines, verdict(r.app, w)...)
	if r.app.lastSeq > 0 && r.app.lastSeq < r.published {
		lines = append(lines, fmt.Sprintf("  (%s had not reached %s when the demo stopped: in flight, "+
			"or published while the feed's %s was down)", seqRange(r.app.lastSeq+1, r.published), w.appName(), w.link))
	}
	n.plain(append(lines, w.epilogue...)...)
}

// fromFeed counts the feed's own answers the app saw, when it saw any.
func fromFeed(s appStats) string {
	if s.welcomes+s.acks == 0 {
		return ""
	}
	return fmt.Sprintf(", %s and %s from the feed", plural(s.welcomes, "welcome", "welcomes"),
		plural(s.acks, "subscription answer", "subscription answers"))
}

// tetherLine reads "2 upstream connections lost, 2 dials refused or
// failed, 2 reconnects, longest downtime 8.73s, 2 subscriptions replayed".
func tetherLine(t tetherStats, w words) string {
	s := fmt.Sprintf("%s lost, %s refused or failed, %s",
		plural(int64(t.losses), "upstream "+w.link, "upstream "+w.link+"s"),
		plural(int64(t.failedDials), w.attempt, w.attempt+"s"),
		plural(int64(t.reconnects), "reconnect", "reconnects"))
	if t.reconnects > 0 {
		s += fmt.Sprintf(", longest downtime %.2fs", t.longestDown.Seconds())
	}
	if t.replayed > 0 {
		s += fmt.Sprintf(", %s replayed", plural(int64(t.replayed), "subscription", "subscriptions"))
	}
	if t.gaveUp {
		s += ", and it GAVE UP"
	}
	return s
}

// recoveryLine reads "4 resumes, 1 snapshot, 2 gaps filled, 0 given up, 6
// duplicates dropped"; resumes and snapshots only when there were any.
func recoveryLine(t tetherStats) string {
	var s string
	if t.resumes > 0 {
		s += plural(int64(t.resumes), "resume", "resumes") + ", "
	}
	if t.resyncs > 0 {
		s += plural(int64(t.resyncs), "snapshot", "snapshots") + ", "
	}
	return s + fmt.Sprintf("%s filled, %d given up, %s dropped", plural(int64(t.gapsFilled), "gap", "gaps"),
		t.gapsLost, plural(int64(t.duplicates), "duplicate", "duplicates"))
}

// verdict is the lines a reader looks for: did the app's connection
// survive, and did it see every event once, in order?
func verdict(a appStats, w words) []string {
	var lines []string
	if a.ends == 0 && a.gaveUp == "" {
		lines = append(lines, fmt.Sprintf("  %s: 0, %s stayed open through every fault.", w.ends, w.kept))
	} else {
		why := a.endedBy
		if why == "" {
			why = a.gaveUp
		}
		lines = append(lines,
			fmt.Sprintf("  !!! %s: %d, %s (%s).", w.ends, a.ends, w.lost, why),
			fmt.Sprintf("  !!! tether exists to keep that %s open: this is a tether bug, please report it.", w.conn))
	}
	if a.gaps+a.duplicates+a.late > 0 {
		return append(lines, fmt.Sprintf("  !!! %s saw %s, %s and %d events out of order: a tether bug, please report it.",
			w.appName(), plural(a.gaps, "silent gap", "silent gaps"), plural(a.duplicates, "duplicate", "duplicates"), a.late))
	}
	note := "."
	switch announced := a.notices+a.tetherGaps > 0; {
	case a.snapshots > 0 && announced:
		note = ", from each snapshot on, except the announced gaps."
	case a.snapshots > 0:
		note = ", from each snapshot on."
	case announced:
		note = ", except the announced gaps."
	}
	return append(lines, "  every event reached "+w.appName()+" once and in order"+note)
}

// seqRange reads "event 600" or "events 515–600".
func seqRange(from, to int64) string {
	if from == to {
		return fmt.Sprintf("event %d", from)
	}
	return fmt.Sprintf("events %d–%d", from, to)
}

// gapName reads "gap 412" or "gap 412–418".
func gapName(g span) string {
	if g.from == g.to {
		return fmt.Sprintf("gap %d", g.from)
	}
	return fmt.Sprintf("gap %d–%d", g.from, g.to)
}
