package demo

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// srcApp is the SSE demo's app, as srcClient is the WebSocket demo's
// client.
const srcApp source = "app"

// sseFault announces a fault of the SSE feed; a stall also starts the
// silence the narration of its detection measures.
func (n *narrator) sseFault(kind sseFault) {
	t := n.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if kind == sseStall {
		n.story.wentSilent(t)
	}
	n.line(t, srcFault, kind.describe())
}

// sseLine narrates the entries the SSE demo tells in its own words: an
// event stream has no close frames, no pings and no handshake, and the app
// is an EventSource. known is false for the entries story.line tells the
// same way in both demos.
func (s *story) sseLine(e zapcore.Entry, f logFields) (text string, ok, known bool) {
	switch e.Message {
	case "upstream reconnect scheduled":
		return s.sseScheduled(e.Time, f), true, true
	case "upstream confirmed":
		if _, again := f.dur("downtime"); again {
			return s.confirmed(e.Time, f), true, true
		}
		return "upstream stream open; its first event confirmed it", true, true
	case "app connected":
		return "accepted the app's EventSource request: from now on tether keeps that one response open, " +
			"whatever the upstream does", true, true
	case "sse app disconnected; its session waits for it to reconnect":
		return fmt.Sprintf("the app's request ended; its session (upstream stream and events) waits %s "+
			"(TETHER_SSE_LINGER) for it to come back with Last-Event-ID", fmtSetting(s.sseLinger(f))), true, true
	case "duplicates dropped":
		n, _ := f.int("count")
		s.stats.duplicates += int(n)
		return fmt.Sprintf("dropped %s the app already has (their seq, TETHER_SEQ_PATH, is not above the last one passed on)",
			plural(n, "duplicate event", "duplicate events")), true, true
	case "sse app reconnected, stream resumed":
		after, _ := f.int("after")
		return fmt.Sprintf("the app came back with Last-Event-ID …-%d: its stream resumes after event %d of the session", after, after), true, true
	case "sse app reconnected after events its session no longer holds; tether-gap sent":
		lost, _ := f.int("lost")
		return fmt.Sprintf("!!! the app came back too late: %s it missed are no longer kept; tether said so with a tether-gap event",
			plural(lost, "event", "events")), true, true
	}
	return "", false, false
}

// sseLinger is the linger time an entry names, or the demo's.
func (s *story) sseLinger(f logFields) time.Duration {
	if d, ok := f.dur("linger"); ok {
		return d
	}
	return sseLinger
}

// sseScheduled narrates "upstream reconnect scheduled" for an event
// stream: what failed, and the delay tether chose.
func (s *story) sseScheduled(t time.Time, f logFields) string {
	attempt, _ := f.int("attempt")
	delay, _ := f.dur("delay")
	next := fmt.Sprintf("→ retry #%d in %s%s", attempt, fmtDelay(delay), sseFloorNote(f))
	if status, ok := f.int("http_status"); ok {
		s.stats.failedDials++
		return fmt.Sprintf("%s refused: HTTP %d%s %s", sseRequestName(attempt-1), status, retryAfterNote(f), next)
	}
	if cause, ok := strings.CutPrefix(f.str("reason"), "dial upstream: "); ok {
		s.stats.failedDials++
		return fmt.Sprintf("%s failed: %s %s", sseRequestName(attempt-1), plainCause(cause), next)
	}
	s.stats.losses++
	return s.sseLoss(t, f) + " " + next
}

// sseLoss names why a live event stream ended.
func (s *story) sseLoss(t time.Time, f logFields) string {
	reason := f.str("reason")
	switch {
	case reason == "heartbeat timeout":
		return s.silence(t)
	case strings.HasPrefix(reason, "upstream ended the event stream"):
		return "the feed ended the stream (a clean end: EventSource reconnects, so does tether)"
	case strings.Contains(reason, "unexpected EOF"):
		return "upstream stream cut mid-response (unexpected EOF)"
	}
	return "upstream lost: " + plainCause(reason)
}

// silence narrates a stream declared dead for its silence: SSE has no
// ping, so silence is all tether can go by.
func (s *story) silence(t time.Time) string {
	bound := fmt.Sprintf("idle limit = ping interval %s + timeout %s, as SSE has no ping",
		fmtSetting(s.pingInterval), fmtSetting(s.pingTimeout))
	since := s.silentSince
	s.silentSince, s.outageSince = time.Time{}, since
	if since.IsZero() || t.Before(since) {
		return "silent stream given up: no byte within the " + bound
	}
	return fmt.Sprintf("silent stream given up: not a byte for %.1fs, not even a comment (%s)", t.Sub(since).Seconds(), bound)
}

// sseFloorNote explains a delay with a minimum: a Retry-After, or the
// feed's retry field.
func sseFloorNote(f logFields) string {
	if ra, ok := f.dur("retry_after"); ok {
		return fmt.Sprintf(" (Retry-After %s + jitter)", fmtSetting(ra))
	}
	if floor, ok := f.dur("floor"); ok {
		return fmt.Sprintf(" (the feed's retry: %d as a floor + jitter)", floor.Milliseconds())
	}
	return ""
}

// sseRequestName names the request that failed: the first one, or retry #n.
func sseRequestName(n int64) string {
	if n <= 0 {
		return "first request"
	}
	return fmt.Sprintf("retry #%d", n)
}
