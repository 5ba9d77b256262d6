package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The methods below are the proxy's hooks (proxy.Metrics). Counts are ints
// because that is what the proxy has at hand; negative counts are ignored
// where a counter cannot go down.

// SessionStarted counts an app connection admitted on a listener of kind
// listener (tether_sessions{listener}).
func (m *Metrics) SessionStarted(listener string) { m.Sessions.WithLabelValues(listener).Inc() }

// SessionEnded counts an app connection gone.
func (m *Metrics) SessionEnded(listener string) { m.Sessions.WithLabelValues(listener).Dec() }

// Forwarded counts n forwarded messages in direction (DirectionAppToUpstream
// or DirectionUpstreamToApp) for an app on a listener of kind listener. It
// runs for every message or burst of messages: the known series are
// resolved once, in New.
func (m *Metrics) Forwarded(direction, listener string, n int) {
	if c := m.messageCounter(direction, listener); c != nil {
		c.Add(float64(n))
		return
	}
	m.Messages.WithLabelValues(direction, listener).Add(float64(n))
}

func (m *Metrics) messageCounter(direction, listener string) prometheus.Counter {
	d := slices.Index(directions[:], direction)
	l := slices.Index(listenerKinds[:], listener)
	if d < 0 || l < 0 {
		return nil
	}
	return m.messages[l][d]
}

// AppDropped counts one message not forwarded because of a transport rule
// (tether_app_dropped_total{reason}).
func (m *Metrics) AppDropped(reason string) { m.Dropped.WithLabelValues(reason).Inc() }

// DroppedFromOutbox counts n app messages lost to a full outbox.
func (m *Metrics) DroppedFromOutbox(n int) { addCount(m.OutboxDropped, n) }

// HandshakeRejected counts an app handshake refused for reason.
func (m *Metrics) HandshakeRejected(reason string) {
	m.HandshakeRejections.WithLabelValues(reason).Inc()
}

// SSEResumed counts what one sse:// request's Last-Event-ID led to
// (tether_sse_resumes_total{outcome}).
func (m *Metrics) SSEResumed(outcome string) { m.SSEResumes.WithLabelValues(outcome).Inc() }

// DrainStarted sets tether_draining to 1. A proxy never stops draining once
// it started, so nothing sets it back.
func (m *Metrics) DrainStarted() { m.Draining.Set(1) }

// Replayed counts n app messages re-sent on a reconnect.
func (m *Metrics) Replayed(n int) { addCount(m.ReplayedMessages, n) }

// DuplicateDropped counts one upstream message dropped as a duplicate.
func (m *Metrics) DuplicateDropped() { m.DuplicatesDropped.Inc() }

// Gap counts one sequence gap by outcome (GapFilled, GapResync, GapClosed,
// GapSkipped, GapNotified), or a stream whose numbering started over
// (GapEpoch, GapRestart).
func (m *Metrics) Gap(outcome string) { m.Gaps.WithLabelValues(outcome).Inc() }

// Recovered counts one stream made whole after a reconnect, by method
// (RecoveryResume, RecoveryHTTP, RecoveryResync).
func (m *Metrics) Recovered(method string) { m.Recoveries.WithLabelValues(method).Inc() }

// HeldBytesChanged adds delta (negative when released) to tether_held_bytes.
func (m *Metrics) HeldBytesChanged(delta int) { m.HeldBytes.Add(float64(delta)) }

func addCount(c interface{ Add(float64) }, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// UpstreamObserver adapts Metrics to upstream.Observer. Permanent and Reauth
// are the configured close-code classes (TETHER_PERMANENT_CODES,
// TETHER_REAUTH_CODES) that name application codes in the code label (see
// CloseCodeLabel); nil matches nothing.
type UpstreamObserver struct {
	Metrics   *Metrics
	Permanent func(code int) bool
	Reauth    func(code int) bool
}

// Dialed counts one dial attempt by result.
func (o UpstreamObserver) Dialed(result string) {
	o.Metrics.UpstreamDials.WithLabelValues(result).Inc()
}

// Lost counts one lost connection by reason and close code (0 without one).
func (o UpstreamObserver) Lost(reason string, code int) {
	o.Metrics.UpstreamDisconnects.WithLabelValues(reason, CloseCodeLabel(code, o.Permanent, o.Reauth)).Inc()
}

// Confirmed observes the time from a loss to the confirmation that ended it.
func (o UpstreamObserver) Confirmed(downtime time.Duration) {
	o.Metrics.ReconnectSeconds.Observe(downtime.Seconds())
}
