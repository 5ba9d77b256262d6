// Package metrics owns tether's Prometheus collectors: one Metrics value holds
// every tether_* collector, registered on a registry its caller creates (never
// the global default registry, so tests build isolated instances), plus the
// Go runtime and process collectors with RegisterRuntime.
//
// Metrics implements the proxy's event hooks (sessions and messages, both by
// listener kind; messages dropped by transport rules, outbox drops,
// handshake rejections, drain, replay and sequencing events) and, with
// UpstreamObserver, the upstream package's Observer (dials, disconnects,
// loss → confirmed time). Neither package imports this one: cmd/tether wires
// them, so the import direction cmd → proxy → upstream holds and neither
// package depends on a metrics library.
//
// Label values come from small fixed sets (documented on each collector and in
// docs/metrics.md); close codes are folded into a bounded set by
// CloseCodeLabel; no label ever carries a session id, a URL or a reason text.
//
// Concurrency: every method is safe for concurrent use (the collectors are),
// and none blocks: they are called from session and upstream goroutines.
package metrics
