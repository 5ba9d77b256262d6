package demo

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// source says who a narration line is about.
type source string

const (
	srcDemo   source = "demo"
	srcFeed   source = "feed"
	srcFault  source = "fault"
	srcTether source = "tether"
	srcClient source = "client" // the WebSocket demo's app
	srcApp    source = "app"    // the SSE demo's app
)

// narrator writes the demo's account, one line per event:
//
//	12.3s  fault   TCP reset: the feed aborts the upstream connection
//
// It is safe for concurrent use: lines from the feed, the faults, tether's
// logger and the client never interleave. Write errors are ignored: the
// narration is a display, and a closed stdout must not stop the demo.
type narrator struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	now   func() time.Time
	words words // the mode's; fixed at construction
	story story // guarded by mu
}

func newNarrator(w io.Writer, now func() time.Time, s settings, verbose bool, wd words) *narrator {
	return &narrator{w: w, start: now(), now: now, words: wd, story: story{settings: s, words: wd, verbose: verbose}}
}

// say writes one line about src, stamped now.
func (n *narrator) say(src source, format string, args ...any) {
	n.sayAt(n.now(), src, fmt.Sprintf(format, args...))
}

// sayAt writes one line about src, stamped at t.
func (n *narrator) sayAt(t time.Time, src source, text string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.line(t, src, text)
}

// plain writes lines without a time stamp (the header and the summary).
func (n *narrator) plain(lines ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range lines {
		_, _ = io.WriteString(n.w, l+"\n")
	}
}

// line writes one stamped line; n.mu is held.
func (n *narrator) line(t time.Time, src source, text string) {
	_, _ = fmt.Fprintf(n.w, "%6.1fs  %-8s%s\n", n.elapsedAt(t).Seconds(), src, text)
}

// elapsedAt is t relative to the demo's start, never negative.
func (n *narrator) elapsedAt(t time.Time) time.Duration {
	return max(t.Sub(n.start), 0)
}

// fault announces a fault; a stall also starts the silence the narration
// of its detection measures.
func (n *narrator) fault(f fault) {
	t := n.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if f.kind == faultStall {
		n.story.silentSince = t
	}
	n.line(t, srcFault, f.describe)
}

// tetherStats returns a copy of what the narrator counted from tether's log.
func (n *narrator) tetherStats() tetherStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.story.stats
}

// fmtDelay prints a delay the way people read them: 143ms, 1.21s.
func fmtDelay(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Round(time.Millisecond).Milliseconds(), 10) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

// fmtSetting prints a configured duration compactly: 1s, 200ms, 1.5s.
func fmtSetting(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

// fmtCount prints n with thousands separators: 1,204.
func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// plural returns "1 gap" or "2 gaps".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmtCount(n) + " " + many
}
