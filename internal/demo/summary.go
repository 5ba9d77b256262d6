package demo

import (
	"fmt"
	"strings"
	"time"
)

// summaryEvery spaces the client's periodic summaries.
const summaryEvery = 5 * time.Second

// header introduces the demo and the settings it runs with.
func (n *narrator) header(o Options, s settings) {
	until := "until Ctrl-C"
	if o.Duration > 0 {
		until = "for " + fmtSetting(o.Duration) + " (Ctrl-C stops it sooner)"
	}
	n.plain(
		"tether demo: a flaky price feed, tether in front of it, and a naive client that connects once and never reconnects.",
		fmt.Sprintf("  seed %d (-seed %d replays the same faults), a fault every ~%s, %d events/s, %s",
			o.Seed, o.Seed, fmtSetting(o.FaultEvery), o.Rate, until),
		fmt.Sprintf("  tether: ping after %s of upstream silence, dead %s later; backoff full jitter %s..%s; "+
			"at least %s after 1012, %s after 1013",
			fmtSetting(s.pingInterval), fmtSetting(s.pingTimeout), fmtSetting(s.backoffBase),
			fmtSetting(s.backoffCap), fmtSetting(s.restartFloor), fmtSetting(s.tryAgainFloor)),
		fmt.Sprintf("  tether: events sequenced by seq (duplicates dropped, what follows a gap held); "+
			"resume after the last event on every new connection; gaps fetched over HTTP, given up after %s with a notice",
			fmtSetting(s.gapTimeout)),
		"",
	)
}

// clientSummary is the periodic line about what the client has seen.
func (n *narrator) clientSummary(s clientStats) {
	n.say(srcClient, "%s", clientLine(s))
}

// clientLine reads "received 1,204 events, 0 gaps (0 missed), 1 snapshot,
// closes: 0".
func clientLine(s clientStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "received %s, %s (%s missed)", plural(s.events, "event", "events"),
		plural(s.gaps, "gap", "gaps"), fmtCount(s.missed))
	if s.duplicates > 0 {
		fmt.Fprintf(&b, ", %s", plural(s.duplicates, "duplicate", "duplicates"))
	}
	if s.late > 0 {
		fmt.Fprintf(&b, ", %s out of order", fmtCount(s.late))
	}
	if s.snapshots > 0 {
		fmt.Fprintf(&b, ", %s", plural(s.snapshots, "snapshot", "snapshots"))
	}
	if s.notices > 0 {
		fmt.Fprintf(&b, ", %s (%s given up)", plural(s.notices, "gap notice", "gap notices"), fmtCount(s.announced))
	}
	fmt.Fprintf(&b, ", closes: %d", s.closes)
	return b.String()
}

// report is everything the final summary needs.
type report struct {
	elapsed time.Duration
	seed    uint64
	faults  [numFaultKinds]int
	tether  tetherStats
	feed    feedStats
	client  clientStats
}

// summary prints the final account.
func (n *narrator) summary(r report) {
	lines := []string{
		"",
		fmt.Sprintf("summary after %.1fs (seed %d)", r.elapsed.Seconds(), r.seed),
		"  faults   " + faultLine(r.faults),
		"  tether   " + tetherLine(r.tether),
		"  recovery " + recoveryLine(r.tether),
		"  feed     " + feedLine(r.feed),
		"  client   " + clientLine(r.client) + fmt.Sprintf(", %s and %s from the feed",
			plural(r.client.welcomes, "welcome", "welcomes"), plural(r.client.acks, "subscription answer", "subscription answers")),
	}
	lines = append(lines, verdict(r.client)...)
	lines = append(lines,
		"  on every new connection tether asked the feed to resume after the client's last event and replayed the",
		"  subscription; it fetched what a live connection missed over HTTP, dropped duplicates, and hid the",
		"  feed's repeated welcomes and answers.",
	)
	n.plain(lines...)
}

// recoveryLine reads "4 resumes, 1 snapshot, 2 gaps filled, 0 given up, 6
// duplicates dropped".
func recoveryLine(t tetherStats) string {
	return fmt.Sprintf("%s, %s, %s filled, %d given up, %s dropped",
		plural(int64(t.resumes), "resume", "resumes"), plural(int64(t.resyncs), "snapshot", "snapshots"),
		plural(int64(t.gapsFilled), "gap", "gaps"), t.gapsLost, plural(int64(t.duplicates), "duplicate", "duplicates"))
}

// feedLine says how the feed's events reached tether.
func feedLine(f feedStats) string {
	return fmt.Sprintf("published %s: %s sent live, %s replayed after resumes, %s served over HTTP; "+
		"hiccups dropped %s and repeated %s",
		plural(f.published, "event", "events"), fmtCount(f.delivered), fmtCount(f.replayed), fmtCount(f.served),
		fmtCount(f.dropped), fmtCount(f.repeated))
}

func faultLine(counts [numFaultKinds]int) string {
	return countsLine(counts[:], faultNames[:], faultPlurals[:])
}

// countsLine reads "5: 1 TCP reset, 2 stalls, …" from per-kind counts and
// their names, or "none injected".
func countsLine(counts []int, names, plurals []string) string {
	total := 0
	var parts []string
	for k, c := range counts {
		total += c
		if c > 0 {
			parts = append(parts, plural(int64(c), names[k], plurals[k]))
		}
	}
	if total == 0 {
		return "none injected"
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}

func tetherLine(t tetherStats) string {
	s := fmt.Sprintf("%s lost, %s refused or failed, %s",
		plural(int64(t.losses), "upstream connection", "upstream connections"),
		plural(int64(t.failedDials), "dial", "dials"),
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

// verdict is the lines a reader looks for: did the client's socket
// survive, and did it see every event once, in order?
func verdict(c clientStats) []string {
	var lines []string
	if c.closes == 0 {
		lines = append(lines, "  closes: 0, the client's one socket stayed open through every fault.")
	} else {
		lines = append(lines,
			fmt.Sprintf("  !!! closes: %d, the client's socket was closed (%s).", c.closes, c.closedBy),
			"  !!! tether exists to keep that socket open: this is a tether bug, please report it.")
	}
	if bad := c.gaps + c.duplicates + c.late; bad == 0 {
		lines = append(lines, "  every event reached the client once and in order"+snapshotNote(c))
	} else {
		lines = append(lines, fmt.Sprintf("  !!! the client saw %s, %s and %d events out of order: a tether bug, please report it.",
			plural(c.gaps, "silent gap", "silent gaps"), plural(c.duplicates, "duplicate", "duplicates"), c.late))
	}
	return lines
}

// snapshotNote qualifies "every event": after a snapshot, every event from
// the snapshot's number; after a gap notice, except those announced.
func snapshotNote(c clientStats) string {
	switch {
	case c.snapshots > 0 && c.notices > 0:
		return ", from each snapshot on, except the announced gaps."
	case c.snapshots > 0:
		return ", from each snapshot on."
	case c.notices > 0:
		return ", except the announced gaps."
	}
	return "."
}
