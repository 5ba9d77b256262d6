package status

import (
	"fmt"
	"time"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// Doc is /status on the admin server: every session with its upstream
// connection, what the status page (/) shows and `tether status` prints.
// Times are RFC 3339, durations seconds. Like the metrics it carries no
// message content and no credentials: upstream URLs lose their userinfo and
// query, failures are named by the metrics' labels, and the only text from
// the upstream is the reason of its close frames (at most 123 bytes).
type Doc struct {
	Version      string    `json:"version"`
	Now          time.Time `json:"now"`
	UpstreamKind string    `json:"upstream_kind"`
	Draining     bool      `json:"draining"`
	MaxSessions  int       `json:"max_sessions"`
	Memory       *Memory   `json:"memory,omitempty"`
	Sessions     []Session `json:"sessions"`
}

// Memory is the memory budget (TETHER_MEMORY_LIMIT): limit, the share
// guaranteed to each session and the bytes used, the sessions it pauses now
// (budget pressure: Full) and the pauses since start.
type Memory struct {
	LimitBytes     int64  `json:"limit_bytes"`
	ShareBytes     int64  `json:"share_bytes"`
	UsedBytes      int64  `json:"used_bytes"`
	PausedSessions int64  `json:"paused_sessions"`
	Pauses         uint64 `json:"pauses"`
	Full           bool   `json:"full"`
}

// MemoryOf reads the budget b now, as /status shows it.
func MemoryOf(b *budget.Budget) *Memory {
	paused := b.Waiting()
	return &Memory{LimitBytes: b.Limit(), ShareBytes: b.Share(), UsedBytes: b.Used(),
		PausedSessions: paused, Pauses: b.Pauses(), Full: paused > 0}
}

// Pressure describes budget pressure in a few words, "" when there is none.
func (m *Memory) Pressure() string {
	if m == nil || !m.Full {
		return ""
	}
	return fmt.Sprintf("memory budget full: %d sessions paused, %s of %s used",
		m.PausedSessions, config.ByteSize(m.UsedBytes), config.ByteSize(m.LimitBytes))
}

// Session is one session. State is the upstream connection's
// (connecting, open, confirmed, lost, waiting, closed), or "handshake" while
// the app's handshake waits for the first dial.
type Session struct {
	ID             uint64            `json:"id"`
	Listener       string            `json:"listener"`
	Started        time.Time         `json:"started"`
	Upstream       string            `json:"upstream"`
	State          string            `json:"state"`
	Live           bool              `json:"live"`
	Connections    uint64            `json:"connections"`
	Attempt        int               `json:"attempt"`
	NextRetry      *time.Time        `json:"next_retry,omitempty"`
	DownSince      *time.Time        `json:"down_since,omitempty"`
	DownSeconds    float64           `json:"down_seconds"`
	LastClose      *Event            `json:"last_close,omitempty"`
	LastFailure    *Event            `json:"last_failure,omitempty"`
	GaveUp         string            `json:"gave_up,omitempty"`
	Reconnects     int               `json:"reconnects"`
	OutboxMessages int               `json:"outbox_messages"`
	OutboxBytes    int               `json:"outbox_bytes"`
	MemoryHeld     int64             `json:"memory_held_bytes"`
	Duplicates     uint64            `json:"duplicates_dropped"`
	Gaps           map[string]uint64 `json:"gaps"`
	Recoveries     map[string]uint64 `json:"recoveries"`
	Recent         []Event           `json:"recent"`
}

// Event is one event of a session's upstream connection: dial_failed,
// lost, connected, restored or gave_up. Reason is a label of
// tether_upstream_dials_total{result} (a failed dial) or
// tether_upstream_disconnects_total{reason} (a loss).
type Event struct {
	At              time.Time `json:"at"`
	Event           string    `json:"event"`
	Reason          string    `json:"reason,omitempty"`
	CloseCode       int       `json:"close_code,omitempty"`
	CloseReason     string    `json:"close_reason,omitempty"`
	HTTPStatus      int       `json:"http_status,omitempty"`
	Attempt         int       `json:"attempt,omitempty"`
	DelaySeconds    float64   `json:"delay_seconds,omitempty"`
	DowntimeSeconds float64   `json:"downtime_seconds,omitempty"`
}

// stateHandshake is a session whose app handshake waits for the first dial.
const stateHandshake = "handshake"

// Build is the document of st: kind is the upstream kind, version tether's.
func Build(st proxy.Status, kind, version string, now time.Time) Doc {
	doc := Doc{
		Version: version, Now: now.UTC(), UpstreamKind: kind,
		Draining: st.Draining, MaxSessions: st.MaxSessions,
		Sessions: make([]Session, 0, len(st.Sessions)),
	}
	if m := st.Memory; m != nil {
		doc.Memory = &Memory{LimitBytes: m.Limit, ShareBytes: m.Share, UsedBytes: m.Used,
			PausedSessions: m.Paused, Pauses: m.Pauses, Full: m.Paused > 0}
	}
	for _, s := range st.Sessions {
		doc.Sessions = append(doc.Sessions, sessionOf(s, now))
	}
	return doc
}

func sessionOf(s proxy.SessionStatus, now time.Time) Session {
	c := s.Connection
	d := Session{
		ID: s.ID, Listener: string(s.Listener), Started: s.Started.UTC(), Upstream: s.Upstream,
		State: c.State.String(), Live: s.Live, Connections: c.Gen, Attempt: c.Attempt,
		GaveUp: c.GaveUp, Reconnects: c.Reconnects,
		OutboxMessages: s.OutboxMessages, OutboxBytes: s.OutboxBytes, MemoryHeld: s.MemoryHeld,
		Duplicates: s.Duplicates, Gaps: s.Gaps, Recoveries: s.Recoveries,
		LastClose: optionalEvent(c.LastClose), LastFailure: optionalEvent(c.LastFailure),
		Recent: make([]Event, 0, len(c.Recent)),
	}
	if !s.Admitted {
		d.State = stateHandshake
	}
	if !c.NextRetry.IsZero() {
		t := c.NextRetry.UTC()
		d.NextRetry = &t
	}
	if !c.DownSince.IsZero() {
		t := c.DownSince.UTC()
		d.DownSince, d.DownSeconds = &t, seconds(now.Sub(c.DownSince))
	}
	for _, e := range c.Recent {
		d.Recent = append(d.Recent, eventOf(e))
	}
	return d
}

func optionalEvent(e upstream.Event) *Event {
	if e.Kind == "" {
		return nil
	}
	doc := eventOf(e)
	return &doc
}

func eventOf(e upstream.Event) Event {
	return Event{
		At: e.At.UTC(), Event: string(e.Kind), Reason: e.Reason,
		CloseCode: e.CloseCode, CloseReason: e.CloseReason, HTTPStatus: e.HTTPStatus,
		Attempt: e.Attempt, DelaySeconds: seconds(e.Delay), DowntimeSeconds: seconds(e.Downtime),
	}
}

// seconds is d in seconds rounded to the millisecond, what an operator
// reads: whole milliseconds over a thousand, which JSON writes as 1.235,
// where Duration.Seconds of the rounded value writes 1.2349999999999999.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond).Milliseconds()) / 1000
}
