package proxy

import (
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/upstream"
)

// An SSE upstream (Options.Upstream.Kind upstream.KindSSE) only speaks: it
// delivers each event as one text message and takes none. Its messages
// reach any app as any upstream's do; an sse:// app gets each event back
// with its own type and data when they come as JSON (transport.SSEApp). What a
// WebSocket or tcp:// app sends has nowhere to go: it is dropped, counted
// and logged rather than queued in the outbox until it overflows (which
// would close the app for nothing).

// sseJSONUpstream reports whether the upstream delivers SSE events as
// {"id","event","data"} text messages.
func sseJSONUpstream(o upstream.Options) bool {
	return o.Kind == upstream.KindSSE && o.SSEFormat == upstream.SSEJSON
}

// readOnlyUpstream reports whether the upstream takes no messages.
func readOnlyUpstream(o upstream.Options) bool { return o.Kind == upstream.KindSSE }

// readOnlyDrops drops the app messages of a session that the upstream
// cannot take. The first is a warning, since an app that writes to a
// read-only upstream usually expects an answer; later ones are logged at
// debug, so a chatty app cannot flood the log. Only the session's reader
// uses it.
type readOnlyDrops struct{ warned bool }

// drop logs and counts one dropped app message of size bytes.
func (d *readOnlyDrops) drop(m Metrics, log *zap.Logger, size int) {
	m.AppDropped(labels.DropReadOnly)
	fields := []zap.Field{zap.Int("bytes", size), zap.String("reason", labels.DropReadOnly)}
	if !d.warned {
		d.warned = true
		log.Warn("app message dropped: the upstream is SSE and takes no messages (later drops are logged at debug)", fields...)
		return
	}
	log.Debug("app message dropped: the upstream is SSE and takes no messages", fields...)
}
