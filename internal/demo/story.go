package demo

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// core is the zapcore.Core behind tether's logger in the demo: every entry
// tether writes goes to the narrator, which turns the ones it knows into
// sentences. It is safe for concurrent use (the narrator serialises).
type core struct {
	n      *narrator
	fields []zapcore.Field // accumulated by With (session id, ...)
}

// logger returns a zap logger that narrates tether's entries.
func (n *narrator) logger() *zap.Logger { return zap.New(&core{n: n}) }

func (c *core) Enabled(l zapcore.Level) bool {
	return l >= zapcore.InfoLevel || c.n.story.verbose
}

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	return &core{n: c.n, fields: append(slices.Clip(c.fields), fields...)}
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	c.n.tether(e, logFields(enc.Fields))
	return nil
}

func (c *core) Sync() error { return nil }

// tether narrates one of tether's log entries, if it tells the story.
func (n *narrator) tether(e zapcore.Entry, f logFields) {
	t := e.Time
	if t.IsZero() {
		t = n.now()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if text, ok := n.story.line(e, f); ok {
		n.line(t, srcTether, text)
	}
}

// logFields are an entry's fields as zap's map encoder stores them.
type logFields map[string]any

func (f logFields) str(k string) string {
	s, _ := f[k].(string)
	return s
}

func (f logFields) dur(k string) (time.Duration, bool) {
	d, ok := f[k].(time.Duration)
	return d, ok
}

func (f logFields) int(k string) (int64, bool) {
	switch v := f[k].(type) {
	case int64:
		return v, true
	case uint64:
		return int64(v), true
	case int:
		return int64(v), true
	}
	return 0, false
}

// tetherStats is what the narrator counted from tether's log.
type tetherStats struct {
	losses      int           // live upstream connections lost
	failedDials int           // dials refused or failed
	reconnects  int           // connections confirmed after a loss
	replayed    int           // subscriptions tether replayed on new connections
	longestDown time.Duration // longest loss → confirmation
	gaveUp      bool          // tether stopped retrying (it never should here)

	resumes    int // streams the feed resumed after their last number
	resyncs    int // streams reset by a snapshot
	gapsFilled int // gaps filled (over HTTP, by a resumed replay, or late on the connection)
	gapsLost   int // gaps given up after the gap timeout
	duplicates int // duplicates dropped
}

// story translates tether's log entries into narration, in the mode's
// words, and counts them. Not safe for concurrent use: the narrator calls
// it under its lock.
type story struct {
	settings
	words
	verbose bool // fixed at construction
	stats   tetherStats

	// silentSince is when the feed went silent (zero otherwise): tether
	// can only notice silence, so the narration adds how long it lasted.
	silentSince time.Time
	// outageSince is silentSince once tether has declared the connection
	// dead, until it is back: the outage began before tether's downtime.
	outageSince time.Time
}

// line returns the narration for one entry, or false to stay silent.
func (s *story) line(e zapcore.Entry, f logFields) (string, bool) {
	switch e.Message {
	case "tether started":
		return fmt.Sprintf("listening on %s for the app; upstream %s", f.str("listen"), f.str("upstream")), true
	case "upstream reconnect scheduled":
		return s.scheduled(e.Time, f), true
	case "upstream confirmed":
		return s.confirmed(e.Time, f), true
	case "app connected":
		return s.appConnected, true
	case "app closed":
		code, _ := f.int("close_code")
		return fmt.Sprintf("%s closed its socket (%d); tether closes the upstream with 1000", s.appName(), code), true
	case "sse app disconnected; its session waits for it to reconnect":
		linger, _ := f.dur("linger")
		return fmt.Sprintf("the app's request ended; its session (upstream stream and events) waits %s "+
			"(TETHER_SSE_LINGER) for it to come back with Last-Event-ID", fmtSetting(linger)), true
	case "sse app reconnected, stream resumed":
		after, _ := f.int("after")
		return fmt.Sprintf("the app came back with Last-Event-ID …-%d: its stream resumes after event %d of the session", after, after), true
	case "sse app reconnected after events its session no longer holds; tether-gap sent":
		lost, _ := f.int("lost")
		return fmt.Sprintf("!!! the app came back too late: %s it missed are no longer kept; tether said so with a tether-gap event",
			plural(lost, "event", "events")), true
	case "session restored":
		return s.restored(f)
	case "gap opened":
		return fmt.Sprintf("%s in the stream: holding what follows, %s", gapRange(f), s.gapWait), true
	case "gap filled":
		return s.gapFilled(f), true
	case "duplicates dropped":
		n, _ := f.int("count")
		s.stats.duplicates += int(n)
		return fmt.Sprintf("dropped %s %s already has (their seq, TETHER_SEQ_PATH, is not above the last one passed on)",
			plural(n, "duplicate event", "duplicate events"), s.appName()), true
	case "stream resumed":
		s.stats.resumes++
		seq, _ := f.int("seq")
		return fmt.Sprintf("the feed resumed the stream where %s left it: replay from event %s, nothing lost, nothing twice",
			s.appName(), fmtCount(seq)), true
	case "stream resynced":
		s.stats.resyncs++
		seq, _ := f.int("seq")
		return fmt.Sprintf("the feed could not replay that far back and sent a snapshot at event %s: "+
			"tether passes it on and restarts the count there", fmtCount(seq)), true
	case "gap given up, app notified", "gap given up, skipped", "unrecoverable gap, closing app":
		s.stats.gapsLost++
		return fmt.Sprintf("!!! %s not filled within %s: %s", gapRange(f), fmtSetting(s.gapTimeout), e.Message), true
	case "gap fetch failed":
		return fmt.Sprintf("HTTP catch-up of %s failed: %s", gapRange(f), f.str("error")), true
	case "shutting down":
		return "shutting down", true
	case "stopped":
		return "stopped", true
	case "upstream failed permanently", "upstream unreachable, giving up":
		s.stats.gaveUp = true
		return fmt.Sprintf("!!! gave up on the upstream: %s", f.str("error")), true
	}
	if e.Level >= zapcore.WarnLevel || s.verbose {
		return raw(e, f), true
	}
	return "", false
}

// scheduled narrates "upstream reconnect scheduled": what failed, and the
// delay tether chose.
func (s *story) scheduled(t time.Time, f logFields) string {
	attempt, _ := f.int("attempt")
	delay, _ := f.dur("delay")
	next := fmt.Sprintf("→ retry #%d in %s%s", attempt, fmtDelay(delay), s.floorNote(f))
	if status, ok := f.int("http_status"); ok {
		s.stats.failedDials++
		return fmt.Sprintf("%s refused: HTTP %d%s %s", s.attemptName(attempt-1), status, retryAfterNote(f), next)
	}
	if cause, ok := strings.CutPrefix(f.str("reason"), "dial upstream: "); ok {
		s.stats.failedDials++
		return fmt.Sprintf("%s failed: %s %s", s.attemptName(attempt-1), s.plainCause(cause), next)
	}
	s.stats.losses++
	return s.loss(t, f) + " " + next
}

// loss names why a live connection ended.
func (s *story) loss(t time.Time, f logFields) string {
	if code, ok := f.int("close_code"); ok {
		if reason := f.str("close_reason"); reason != "" {
			return fmt.Sprintf("upstream closed with %d %q", code, reason)
		}
		return fmt.Sprintf("upstream closed with %d", code)
	}
	reason := f.str("reason")
	switch {
	case reason == "heartbeat timeout":
		return s.silent(t)
	case strings.HasPrefix(reason, "upstream ended the event stream"):
		return "the feed ended the stream (a clean end: EventSource reconnects, so does tether)"
	}
	return "upstream lost: " + s.plainCause(reason)
}

// silent narrates a heartbeat timeout, with the silence it took when the
// demo knows when the feed went quiet.
func (s *story) silent(t time.Time) string {
	bound := fmt.Sprintf(s.idleLimit, fmtSetting(s.pingInterval), fmtSetting(s.pingTimeout))
	since := s.silentSince
	s.silentSince, s.outageSince = time.Time{}, since
	if since.IsZero() || t.Before(since) {
		return fmt.Sprintf("%s within %s", s.silence, bound)
	}
	return fmt.Sprintf("%s for %.1fs (%s)", s.silence, t.Sub(since).Seconds(), bound)
}

// floorNote explains a delay the server imposed a minimum on: a close code
// that asks for one, a Retry-After, or an event stream's retry field.
func (s *story) floorNote(f logFields) string {
	code, _ := f.int("close_code")
	switch {
	case code == 1012:
		return fmt.Sprintf(" (restart floor %s + jitter)", fmtSetting(s.restartFloor))
	case code == 1013:
		return fmt.Sprintf(" (try-again floor %s + jitter)", fmtSetting(s.tryAgainFloor))
	}
	if ra, ok := f.dur("retry_after"); ok {
		return fmt.Sprintf(" (Retry-After %s + jitter)", fmtSetting(ra))
	}
	if floor, ok := f.dur("floor"); ok {
		return fmt.Sprintf(" (the feed's retry: %d as a floor + jitter)", floor.Milliseconds())
	}
	return ""
}

func retryAfterNote(f logFields) string {
	if ra, ok := f.dur("retry_after"); ok {
		return ", Retry-After " + fmtSetting(ra)
	}
	return ""
}

// confirmed narrates "upstream confirmed": the first connection, or the end
// of an outage.
func (s *story) confirmed(t time.Time, f logFields) string {
	down, ok := f.dur("downtime")
	if !ok {
		return s.firstConfirmed
	}
	attempt, _ := f.int("attempt")
	s.stats.reconnects++
	s.stats.longestDown = max(s.stats.longestDown, down)
	since := s.outageSince
	s.outageSince = time.Time{}
	if since.IsZero() || t.Before(since) {
		return fmt.Sprintf("upstream back on retry #%d (downtime %.2fs)", attempt, down.Seconds())
	}
	return fmt.Sprintf("upstream back on retry #%d (downtime %.2fs after detection, %.1fs since the feed went silent)",
		attempt, down.Seconds(), t.Sub(since).Seconds())
}

// restored narrates "session restored": what tether sent on a new
// connection, before the app's own traffic, so the feed serves the app as
// before. A first connection with nothing to restore is silent.
func (s *story) restored(f logFields) (string, bool) {
	auth, _ := f.int("auth_sent")
	resumed, _ := f.int("resumed")
	replayed, _ := f.int("replayed")
	flushed, _ := f.int("outbox_flushed")
	resent, _ := f.int("unacked_resent")
	if auth+resumed+replayed+flushed+resent == 0 {
		return "", false
	}
	s.stats.replayed += int(replayed)
	parts := []string{fmt.Sprintf("subscriptions replayed: %d", replayed)}
	if resumed > 0 {
		parts = append([]string{fmt.Sprintf("resume sent (after %s's last event)", s.appName())}, parts...)
	}
	if auth > 0 {
		parts = append([]string{"login re-sent"}, parts...)
	}
	if flushed > 0 {
		parts = append(parts, fmt.Sprintf("queued messages sent: %d", flushed))
	}
	if resent > 0 {
		parts = append(parts, fmt.Sprintf("unacknowledged messages re-sent: %d", resent))
	}
	return "session restored on the new connection: " + strings.Join(parts, ", "), true
}

// gapFilled narrates "gap filled": what filled it, and how long the held
// events waited.
func (s *story) gapFilled(f logFields) string {
	s.stats.gapsFilled++
	d, _ := f.dur("duration")
	how := map[string]string{
		"http":   "over HTTP",
		"resume": "by the resumed replay",
		"live":   "by late events on the connection",
	}[f.str("method")]
	if how == "" {
		how = "by " + f.str("method")
	}
	return fmt.Sprintf("%s filled %s in %s: the held events follow, in order", gapRange(f), how, fmtDelay(d))
}

// gapRange prints an entry's gap_from and gap_to as "gap 412–414".
func gapRange(f logFields) string {
	from, _ := f.int("gap_from")
	to, _ := f.int("gap_to")
	return gapName(span{from, to})
}

// attemptName names the dial or request that failed: the first one, or
// retry #n.
func (s *story) attemptName(n int64) string {
	if n <= 0 {
		return "first " + s.attempt
	}
	return fmt.Sprintf("retry #%d", n)
}

// plainCause turns a Go network error into the words people know it by.
func (s *story) plainCause(reason string) string {
	switch {
	case strings.Contains(reason, "connection reset by peer"):
		return "connection reset by peer"
	case strings.Contains(reason, "connection refused"):
		return "connection refused"
	case strings.Contains(reason, "broken pipe"):
		return "broken pipe"
	case strings.Contains(reason, "i/o timeout"):
		return "timed out"
	case strings.HasSuffix(reason, "EOF"):
		return s.cutShort
	case reason == "":
		return "unknown cause"
	}
	return reason
}

// raw renders an entry the story does not know: message and sorted fields.
func raw(e zapcore.Entry, f logFields) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	if e.Level != zapcore.InfoLevel {
		b.WriteString("[" + e.Level.String() + "] ")
	}
	b.WriteString(e.Message)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, f[k])
	}
	return b.String()
}
