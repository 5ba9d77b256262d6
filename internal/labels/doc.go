// Package labels is the one definition of the label values tether's
// metrics carry (docs/design.md "Metrics"): message directions, listener
// kinds, why a message was dropped or a handshake refused, gap outcomes,
// recovery methods, upstream dial results and loss reasons. The packages
// that report events (proxy, upstream, internal/transport,
// internal/sequence) and the one that turns them into
// Prometheus series (internal/metrics, which pre-creates every value at
// zero) all use these constants, so a value cannot be reported under one
// spelling and pre-created under another.
//
// It holds constants only and imports nothing: any package may import it
// without changing the import direction cmd → proxy → upstream.
package labels
