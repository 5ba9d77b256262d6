package demo

import (
	"fmt"
	"strings"
	"time"
)

// sseHeader introduces the SSE demo and the settings it runs with.
func (n *narrator) sseHeader(o Options, s settings) {
	until := "until Ctrl-C"
	if o.Duration > 0 {
		until = "for " + fmtSetting(o.Duration) + " (Ctrl-C stops it sooner)"
	}
	n.plain(
		"tether demo -sse: a flaky Server-Sent Events price feed, tether in front of it, and an EventSource-like app.",
		fmt.Sprintf("  seed %d (-seed %d replays the same faults), a fault every ~%s, %d events/s, %s",
			o.Seed, o.Seed, fmtSetting(o.FaultEvery), o.Rate, until),
		fmt.Sprintf("  tether: gives an upstream stream up after %s of silence (ping interval %s + timeout %s: SSE has no ping); "+
			"backoff full jitter %s..%s, never sooner than the feed's retry or Retry-After (then + up to %s of jitter)",
			fmtSetting(s.pingInterval+s.pingTimeout), fmtSetting(s.pingInterval), fmtSetting(s.pingTimeout),
			fmtSetting(s.backoffBase), fmtSetting(s.backoffCap), fmtSetting(s.backoffCap)),
		fmt.Sprintf("  tether: resumes the feed with Last-Event-ID; events sequenced by seq in their data (duplicates dropped, "+
			"gaps held, given up after %s with a notice); serves the app on an sse:// listener with its own ids",
			fmtSetting(s.gapTimeout)),
		"  app: one GET with Accept: text/event-stream; like a browser's EventSource it would reconnect with "+
			"Last-Event-ID if its stream ended. Behind tether it never should.",
		"",
	)
}

// appLine reads "received 1,204 events, 0 gaps (0 missed), 3 keep-alives,
// 1 request, stream ends: 0".
func appLine(s appStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "received %s, %s (%s missed)", plural(s.events, "event", "events"),
		plural(s.gaps, "gap", "gaps"), fmtCount(s.missed))
	if s.duplicates > 0 {
		fmt.Fprintf(&b, ", %s", plural(s.duplicates, "duplicate", "duplicates"))
	}
	if s.late > 0 {
		fmt.Fprintf(&b, ", %s out of order", fmtCount(s.late))
	}
	if s.notices > 0 {
		fmt.Fprintf(&b, ", %s (%s given up)", plural(s.notices, "gap notice", "gap notices"), fmtCount(s.announced))
	}
	if s.tetherGaps > 0 {
		fmt.Fprintf(&b, ", %s", plural(s.tetherGaps, "tether-gap event", "tether-gap events"))
	}
	fmt.Fprintf(&b, ", %s, %s, stream ends: %d", plural(s.keepAlives, "keep-alive", "keep-alives"),
		plural(int64(s.requests), "request", "requests"), s.ends)
	return b.String()
}

// sseReport is everything the SSE demo's summary needs.
type sseReport struct {
	elapsed time.Duration
	seed    uint64
	faults  [numSSEFaults]int
	tether  tetherStats
	feed    sseFeedStats
	app     appStats
}

// sseSummary prints the SSE demo's final account.
func (n *narrator) sseSummary(r sseReport) {
	lines := []string{
		"",
		fmt.Sprintf("summary after %.1fs (seed %d)", r.elapsed.Seconds(), r.seed),
		"  faults   " + sseFaultLine(r.faults),
		"  tether   " + sseTetherLine(r.tether),
		"  feed     " + sseFeedLine(r.feed),
		"  app      " + appLine(r.app),
	}
	if r.app.lastID != "" {
		lines = append(lines, "  the app's last event id: "+r.app.lastID+" (tether's session token and event count)")
	}
	lines = append(lines, sseVerdict(r.app)...)
	if r.app.lastSeq > 0 && r.app.lastSeq < r.feed.published {
		lines = append(lines, fmt.Sprintf("  (%s had not reached the app when the demo stopped: in flight, or published while the feed's stream was down)",
			seqRange(r.app.lastSeq+1, r.feed.published)))
	}
	lines = append(lines,
		"  on every upstream reconnect tether sent the feed the last id it had as Last-Event-ID, never sooner than",
		"  the feed's retry (or a Retry-After) asked; the feed replayed what the app had not seen, tether dropped",
		"  repeats by their seq, and wrote the rest on the app's one open response, under its own ids.",
	)
	n.plain(lines...)
}

func sseFaultLine(counts [numSSEFaults]int) string {
	return countsLine(counts[:], sseFaultNames[:], sseFaultPlurals[:])
}

// sseTetherLine reads "5 upstream streams lost, 2 requests refused or
// failed, 5 reconnects, longest downtime 3.21s, 0 duplicates dropped".
func sseTetherLine(t tetherStats) string {
	s := fmt.Sprintf("%s lost, %s refused or failed, %s",
		plural(int64(t.losses), "upstream stream", "upstream streams"),
		plural(int64(t.failedDials), "request", "requests"),
		plural(int64(t.reconnects), "reconnect", "reconnects"))
	if t.reconnects > 0 {
		s += fmt.Sprintf(", longest downtime %.2fs", t.longestDown.Seconds())
	}
	s += fmt.Sprintf(", %s dropped", plural(int64(t.duplicates), "duplicate", "duplicates"))
	if t.gapsLost > 0 {
		s += fmt.Sprintf(", %s given up", plural(int64(t.gapsLost), "gap", "gaps"))
	}
	if t.gaveUp {
		s += ", and it GAVE UP"
	}
	return s
}

// sseFeedLine says how the feed's events reached tether.
func sseFeedLine(f sseFeedStats) string {
	s := fmt.Sprintf("published %s; %s from tether: %d new, %d resumed with Last-Event-ID (%s replayed), %d refused with 503",
		plural(f.published, "event", "events"), plural(int64(f.requests), "request", "requests"),
		f.fresh, f.resumed, plural(f.replayed, "event", "events"), f.refused)
	if f.lost > 0 {
		s += fmt.Sprintf("; %s no longer kept when asked for", plural(f.lost, "event", "events"))
	}
	return s
}

// sseVerdict is the lines a reader looks for: did the app's stream
// survive, and did it see every event once, in order?
func sseVerdict(a appStats) []string {
	var lines []string
	switch {
	case a.ends == 0 && a.gaveUp == "":
		lines = append(lines, "  stream ends: 0, the app's one EventSource request stayed open through every fault.")
	default:
		why := a.endedBy
		if why == "" {
			why = a.gaveUp
		}
		lines = append(lines,
			fmt.Sprintf("  !!! stream ends: %d, the app's stream ended (%s).", a.ends, why),
			"  !!! tether exists to keep that stream open: this is a tether bug, please report it.")
	}
	if bad := a.gaps + a.duplicates + a.late; bad == 0 {
		note := "."
		if a.notices > 0 || a.tetherGaps > 0 {
			note = ", except the announced gaps."
		}
		lines = append(lines, "  every event reached the app once and in order"+note)
	} else {
		lines = append(lines, fmt.Sprintf("  !!! the app saw %s, %s and %d events out of order: a tether bug, please report it.",
			plural(a.gaps, "silent gap", "silent gaps"), plural(a.duplicates, "duplicate", "duplicates"), a.late))
	}
	return lines
}

// seqRange reads "event 600" or "events 515–600".
func seqRange(from, to int64) string {
	if from == to {
		return fmt.Sprintf("event %d", from)
	}
	return fmt.Sprintf("events %d–%d", from, to)
}
