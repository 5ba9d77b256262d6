package proxy

import (
	"cmp"
	"net/url"
	"slices"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

// Status is a Server's sessions as the admin server's status page shows
// them. Like the metrics, it holds no message content, no credentials and
// no query string.
type Status struct {
	Draining    bool
	MaxSessions int
	Memory      *MemoryStatus   // the memory budget; nil without one
	Sessions    []SessionStatus // by ID
}

// MemoryStatus is the memory budget (Options.Budget) now: its Limit, the
// Share guaranteed to each session, the bytes Used in all, the sessions
// Paused by it now and the Pauses since start.
type MemoryStatus struct {
	Limit, Share, Used int64
	Paused             int64
	Pauses             uint64
}

// SessionStatus is one session.
type SessionStatus struct {
	ID       uint64
	Listener ListenerKind
	Started  time.Time
	// Upstream is where the session's upstream client dials: scheme, host
	// and path of the URL, without userinfo or query, which may carry
	// credentials (the path is logged the same way).
	Upstream string
	// Admitted is false while the app's handshake waits for the first dial
	// (at most TETHER_ACCEPT_WAIT): the session has no app socket yet, and
	// Connection is the zero Status.
	Admitted bool
	// Live: a restored connection takes the app's messages directly;
	// otherwise they are queued in the outbox.
	Live       bool
	Connection upstream.Status
	// OutboxMessages and OutboxBytes are the app messages queued now, those
	// waiting for an acknowledgement included.
	OutboxMessages, OutboxBytes int
	// MemoryHeld is what the session holds against the memory budget.
	MemoryHeld int64
	// Duplicates counts upstream messages dropped as already delivered.
	Duplicates uint64
	// Gaps counts sequence gaps by outcome (GapFilled, GapResync, GapClosed,
	// GapSkipped, GapNotified, GapEpoch, GapRestart, GapResyncFailed),
	// Recoveries streams made whole by method
	// (RecoveryResume, RecoveryHTTP, RecoveryResync); outcomes that never
	// happened are left out.
	Gaps, Recoveries map[string]uint64
}

// Status returns the sessions' state. Safe for concurrent use; it takes
// each session's lock briefly, one at a time.
func (s *Server) Status() Status {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	st := Status{Draining: draining, MaxSessions: s.opts.MaxSessions}
	if b := s.opts.Budget; b != nil {
		st.Memory = &MemoryStatus{Limit: b.Limit(), Share: b.Share(), Used: b.Used(), Paused: b.Waiting(), Pauses: b.Pauses()}
	}
	for _, sess := range s.snapshot() {
		st.Sessions = append(st.Sessions, sess.status())
	}
	slices.SortFunc(st.Sessions, func(a, b SessionStatus) int { return cmp.Compare(a.ID, b.ID) })
	return st
}

func (sess *Session) status() SessionStatus {
	raw := sess.upstreamURL
	if raw == "" {
		raw = sess.srv.opts.Upstream.URL
	}
	st := SessionStatus{
		ID:       sess.id,
		Listener: sess.kind,
		Started:  sess.started,
		Upstream: statusURL(raw),
	}
	st.Duplicates, st.Gaps, st.Recoveries = sess.tally.Counts()
	select {
	case <-sess.appReady:
		// client was set before appReady was closed, and is never changed.
		st.Admitted = true
		st.Connection = sess.client.Status()
	default:
	}
	sess.mu.Lock()
	st.Live = sess.live != nil
	st.OutboxMessages, st.OutboxBytes = sess.outbox.Len(), sess.outbox.Bytes()
	sess.mu.Unlock()
	if sess.acct != nil {
		st.MemoryHeld = sess.acct.Held()
	}
	return st
}

// statusURL is raw without userinfo, query and fragment.
func statusURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}
