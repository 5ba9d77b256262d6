package demo

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// httpServer is one of the demo's HTTP servers on 127.0.0.1:0: the
// WebSocket feed's catch-up endpoint, the SSE feed.
type httpServer struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
}

// startHTTP listens on a free loopback port and serves srv there.
func startHTTP(srv *http.Server) (*httpServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if srv.ReadHeaderTimeout == 0 {
		srv.ReadHeaderTimeout = 5 * time.Second
	}
	s := &httpServer{ln: ln, srv: srv, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = srv.Serve(ln) // returns http.ErrServerClosed after close
	}()
	return s, nil
}

// url is the server's address with path.
func (s *httpServer) url(path string) string { return "http://" + s.ln.Addr().String() + path }

// close closes the listener and every connection at once, and waits for
// Serve to return. Handlers still running see their connection gone.
func (s *httpServer) close() {
	_ = s.srv.Close()
	<-s.done
}
