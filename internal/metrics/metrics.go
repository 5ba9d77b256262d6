package metrics

import (
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// ReconnectBuckets are the upper bounds, in seconds, of
// tether_reconnect_seconds. Loss → confirmed takes from a few milliseconds (a
// reset on a healthy network, reconnected at once) to minutes (a server
// restart behind TETHER_RESTART_FLOOR and a growing backoff). A 1-2-5 series
// from 10ms to 60s keeps histogram_quantile's interpolation error under a
// factor of 2.5 over that whole range, so p50 and p99 are readable on one
// dashboard; 120s and 300s keep outages longer than a minute apart from the
// +Inf bucket.
var ReconnectBuckets = []float64{
	0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300,
}

// Metrics holds every tether_* collector. Create it with New; the exported
// fields are for tests and for wiring, events go through the methods.
type Metrics struct {
	Sessions            *prometheus.GaugeVec   // listener
	UpstreamDials       *prometheus.CounterVec // result
	UpstreamDisconnects *prometheus.CounterVec // reason, code
	ReconnectSeconds    prometheus.Histogram
	Recoveries          *prometheus.CounterVec // method
	Messages            *prometheus.CounterVec // direction, listener
	Dropped             *prometheus.CounterVec // reason
	DuplicatesDropped   prometheus.Counter
	Gaps                *prometheus.CounterVec // outcome
	ReplayedMessages    prometheus.Counter
	OutboxMessages      prometheus.GaugeFunc
	OutboxDropped       prometheus.Counter
	HandshakeRejections *prometheus.CounterVec // reason
	SSEResumes          *prometheus.CounterVec // outcome
	HeldBytes           prometheus.Gauge
	Draining            prometheus.Gauge
	BuildInfo           *prometheus.GaugeVec // version

	messages [len(listenerKinds)][len(directions)]prometheus.Counter // hot path, resolved once
	outbox   atomic.Pointer[func() int]
	memory   atomic.Pointer[MemorySource]
}

// New creates every collector and registers it on reg. version becomes the
// version label of tether_build_info.
func New(reg prometheus.Registerer, version string) (*Metrics, error) {
	m := newCollectors()
	var errs []error
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	m.BuildInfo.WithLabelValues(version).Set(1)
	m.precreate()
	return m, nil
}

// RegisterRuntime adds the Go runtime and process collectors (go_*,
// process_*) to reg: memory, goroutines, file descriptors and CPU of the
// sidecar, which a resource limit is sized from. Besides the default set,
// the Go collector serves go_gc_heap_live_bytes (runtime/metrics'
// /gc/heap/live:bytes): the heap the last GC found reachable, which, unlike
// go_memstats_heap_inuse_bytes, does not rise and fall with the garbage
// made since, so a leak shows as its steady rise (the churn test and the
// chaos soak sample it from outside the process).
func RegisterRuntime(reg prometheus.Registerer) error {
	live := collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}
	return errors.Join(
		reg.Register(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(live))),
		reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	)
}

func newCollectors() *Metrics {
	m := &Metrics{
		Sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tether_sessions",
			Help: "App connections open now (one upstream stream each), by listener kind: ws, unix, tcp, sse.",
		}, []string{"listener"}),
		UpstreamDials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_upstream_dials_total",
			Help: "Upstream dial attempts by result: ok, refused, timeout, dns, tls, network, http_401, http_403, http_429, http_5xx, http_4xx, http_other, bad_url, token, subprotocol, handshake, proxy, proxy_auth.",
		}, []string{"result"}),
		UpstreamDisconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_upstream_disconnects_total",
			Help: "Open upstream connections lost, by reason (close, reset, eof, heartbeat, protocol, restore, network) and close code (1000-1015, 3xxx, 4xxx, permanent, reauth, other; none without a close frame).",
		}, []string{"reason", "code"}),
		ReconnectSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tether_reconnect_seconds",
			Help:    "Time from the loss of a confirmed upstream connection to the confirmation of its replacement.",
			Buckets: ReconnectBuckets,
		}),
		Recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_recoveries_total",
			Help: "Streams made whole after a reconnect, by method: resume (server replay), http (TETHER_GAPFILL_URL), resync (snapshot).",
		}, []string{"method"}),
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_messages_total",
			Help: "Messages forwarded, by direction: app_to_upstream (received from the app), upstream_to_app (delivered to the app); and by listener kind: ws, unix, tcp, sse.",
		}, []string{"direction", "listener"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_app_dropped_total",
			Help: "Messages not forwarded because of a transport rule, by reason: from the app, too_large, invalid_utf8, unterminated (the app is closed or gone); to a tcp:// app, binary and newline (TETHER_TCP_BINARY, TETHER_TCP_NEWLINE set to drop or close); read_only, an app message while the upstream is SSE; unframed, a message its protocol could not frame.",
		}, []string{"reason"}),
		DuplicatesDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tether_duplicates_dropped_total",
			Help: "Upstream messages not delivered because their sequence number was already delivered.",
		}),
		Gaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_gaps_total",
			Help: "Sequence gaps by outcome: filled, resync, closed, skipped, notified.",
		}, []string{"outcome"}),
		ReplayedMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tether_replayed_messages_total",
			Help: "App messages re-sent upstream on reconnect (auth, resume, subscriptions, unacknowledged messages).",
		}),
		OutboxDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tether_outbox_dropped_total",
			Help: "App messages lost to a full outbox, whatever TETHER_OUTBOX_OVERFLOW says.",
		}),
		HandshakeRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_app_handshake_rejections_total",
			Help: "App WebSocket handshakes refused (and tcp:// apps refused on accept), by reason: max_sessions, draining, upstream_permanent, bad_request, timeout, aborted, origin, host, headers_too_large, path.",
		}, []string{"reason"}),
		SSEResumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_sse_resumes_total",
			Help: "sse:// requests with a Last-Event-ID, by outcome: resumed (a lingering session, nothing lost), evicted (resumed, events lost), session_gone (tether's id, its session gone), foreign_id (an id tether cannot read, WebSocket upstream), upstream (passed to the SSE upstream).",
		}, []string{"outcome"}),
		HeldBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tether_held_bytes",
			Help: "Bytes of upstream messages held behind a sequence gap, across sessions.",
		}),
		Draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tether_draining",
			Help: "1 from the start of a shutdown drain (SIGTERM/SIGINT) until exit, 0 otherwise.",
		}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tether_build_info",
			Help: "Always 1; the version label is tether's version.",
		}, []string{"version"}),
	}
	m.OutboxMessages = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tether_outbox_messages",
		Help: "App messages queued while their upstream is down, across sessions.",
	}, m.outboxMessages)
	for l, listener := range listenerKinds {
		for d, direction := range directions {
			m.messages[l][d] = m.Messages.WithLabelValues(direction, listener)
		}
	}
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{
		m.Sessions, m.UpstreamDials, m.UpstreamDisconnects, m.ReconnectSeconds,
		m.Recoveries, m.Messages, m.Dropped, m.DuplicatesDropped, m.Gaps, m.ReplayedMessages,
		m.OutboxMessages, m.OutboxDropped, m.HandshakeRejections, m.SSEResumes, m.HeldBytes,
		m.Draining, m.BuildInfo,
	}, m.memoryCollectors()...)
}

// precreate makes every known labelled series exist at zero.
func (m *Metrics) precreate() {
	for _, v := range dialResults {
		m.UpstreamDials.WithLabelValues(v)
	}
	for _, v := range lossReasons {
		if v != "close" {
			m.UpstreamDisconnects.WithLabelValues(v, codeNone)
		}
	}
	for _, v := range rejectionReasons {
		m.HandshakeRejections.WithLabelValues(v)
	}
	for _, v := range gapOutcomes {
		m.Gaps.WithLabelValues(v)
	}
	for _, v := range sseResumes {
		m.SSEResumes.WithLabelValues(v)
	}
	for _, v := range recoveryMethods {
		m.Recoveries.WithLabelValues(v)
	}
	for _, v := range listenerKinds {
		m.Sessions.WithLabelValues(v)
	}
	for _, v := range dropReasons {
		m.Dropped.WithLabelValues(v)
	}
}

// SetOutboxSource sets the function tether_outbox_messages reads at each
// scrape: the number of messages queued across sessions, counted where the
// outboxes live, so the gauge cannot drift from them. Until it is set the
// gauge reads 0.
func (m *Metrics) SetOutboxSource(f func() int) { m.outbox.Store(&f) }

func (m *Metrics) outboxMessages() float64 {
	if f := m.outbox.Load(); f != nil && *f != nil {
		return float64((*f)())
	}
	return 0
}
