package main

import (
	"fmt"
	"io/fs"
	"net"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/proxy"
)

// openListener is one TETHER_LISTEN entry, bound.
type openListener struct {
	spec listener
	ln   net.Listener
}

// openListeners binds every TETHER_LISTEN entry in order. When one fails,
// those already bound are closed (unix sockets removed) and the error names
// the entry: tether serves all its listeners or none, since an app told to
// use a listener that is missing would fail in a way that is hard to trace
// back.
func openListeners(list listenList, mode socketMode, log *zap.Logger) ([]openListener, error) {
	out := make([]openListener, 0, len(list))
	for _, spec := range list {
		ln, err := bind(spec, fs.FileMode(mode), log)
		if err != nil {
			closeListeners(out)
			return nil, fmt.Errorf("listen on TETHER_LISTEN entry %d %q: %w", spec.pos, spec.String(), err)
		}
		out = append(out, openListener{spec: spec, ln: ln})
	}
	return out, nil
}

// bind opens one entry's socket. An sse:// entry's listener carries its
// path, which ServeKind serves (proxy.SSEListener).
func bind(spec listener, mode fs.FileMode, log *zap.Logger) (net.Listener, error) {
	switch spec.kind {
	case proxy.ListenerUnix:
		return listenUnix(spec.addr, mode, log)
	case proxy.ListenerSSE:
		ln, err := net.Listen("tcp", spec.addr)
		if err != nil {
			return nil, err
		}
		return &proxy.SSEListener{Listener: ln, Path: spec.path}, nil
	}
	return net.Listen("tcp", spec.addr)
}

// closeListeners closes listeners that were never served.
func closeListeners(lns []openListener) {
	for _, l := range lns {
		_ = l.ln.Close()
	}
}
