package main

import (
	"fmt"
	"io/fs"
	"net"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/proxy"
)

// openListener is one TETHER_LISTEN entry, bound.
type openListener struct {
	spec config.Listener
	ln   net.Listener
}

// openListeners binds every TETHER_LISTEN entry in order. When one fails,
// those already bound are closed (unix sockets removed) and the error names
// the entry: tether serves all its listeners or none, since an app told to
// use a listener that is missing would fail in a way that is hard to trace
// back.
func openListeners(list config.ListenList, mode config.SocketMode, log *zap.Logger) ([]openListener, error) {
	out := make([]openListener, 0, len(list))
	for _, spec := range list {
		ln, err := bind(spec, fs.FileMode(mode), log)
		if err != nil {
			closeListeners(out)
			return nil, fmt.Errorf("listen on TETHER_LISTEN entry %d %q: %w", spec.Pos, spec.String(), err)
		}
		out = append(out, openListener{spec: spec, ln: ln})
	}
	return out, nil
}

// bind opens one entry's socket. An sse:// entry's listener carries its
// path, which ServeKind serves (proxy.SSEListener).
func bind(spec config.Listener, mode fs.FileMode, log *zap.Logger) (net.Listener, error) {
	switch spec.Kind {
	case proxy.ListenerUnix:
		return listenUnix(spec.Addr, mode, log)
	case proxy.ListenerSSE:
		ln, err := net.Listen("tcp", spec.Addr)
		if err != nil {
			return nil, err
		}
		return &proxy.SSEListener{Listener: ln, Path: spec.Path}, nil
	}
	return net.Listen("tcp", spec.Addr)
}

// closeListeners closes listeners that were never served.
func closeListeners(lns []openListener) {
	for _, l := range lns {
		_ = l.ln.Close()
	}
}
