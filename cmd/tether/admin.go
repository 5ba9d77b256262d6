package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Admin server limits. Probes and scrapes are tiny requests; these bounds keep a
// slow or hostile client (the admin port is bound to 0.0.0.0 in the Helm chart)
// from holding connections open forever (slowloris).
const (
	adminReadHeaderTimeout = 5 * time.Second
	adminReadTimeout       = 10 * time.Second
	adminWriteTimeout      = 30 * time.Second // a large /metrics page on a slow link
	adminIdleTimeout       = 60 * time.Second
	adminMaxHeaderBytes    = 16 << 10
)

// adminServer serves /healthz, /readyz, /metrics, and the status page: / in
// HTML and /status in JSON.
//
// Concurrency: Start is called once; Shutdown may be called any number of times,
// from any goroutine, and returns only after the serving goroutine has exited.
type adminServer struct {
	addr string
	srv  *http.Server
	log  *zap.Logger

	mu   sync.Mutex
	done chan struct{} // closed when Serve returns; nil before Start
}

// adminHandlers are what the admin server answers besides /healthz.
type adminHandlers struct {
	// Ready reports readiness within the probe request's context: nil
	// error means ready, and a nil func is always ready.
	Ready func(context.Context) error
	// Pressure describes memory budget pressure for /readyz, "" when there
	// is none; nil: never. A full budget does not make tether unready: it
	// still admits apps, each with its guaranteed share, and failing the
	// probe would take the pod out of its Service because one app stopped
	// reading. /readyz says so in its body instead.
	Pressure func() string
	// Metrics serves /metrics; nil answers 404 there.
	Metrics http.Handler
	// Status builds the status document of / and /status; nil answers 404
	// there.
	Status statusSource
}

// newAdminServer prepares (but does not start) the admin server on addr.
func newAdminServer(addr string, h adminHandlers, log *zap.Logger) *adminServer {
	log = log.Named("admin")
	return &adminServer{
		addr: addr,
		log:  log,
		srv: &http.Server{
			Handler:           adminMux(h, log),
			ReadHeaderTimeout: adminReadHeaderTimeout,
			ReadTimeout:       adminReadTimeout,
			WriteTimeout:      adminWriteTimeout,
			IdleTimeout:       adminIdleTimeout,
			MaxHeaderBytes:    adminMaxHeaderBytes,
			ErrorLog:          zap.NewStdLog(log.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))),
		},
	}
}

func adminMux(h adminHandlers, log *zap.Logger) *http.ServeMux {
	ready := h.Ready
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		// Liveness: answering at all proves the process is not wedged. Never tie
		// it to the upstream, or the kubelet restarts the pod during an outage.
		writePlain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			if err := ready(r.Context()); err != nil {
				writePlain(w, http.StatusServiceUnavailable, err.Error())
				return
			}
		}
		if h.Pressure != nil {
			if p := h.Pressure(); p != "" {
				writePlain(w, http.StatusOK, "ready; "+p)
				return
			}
		}
		writePlain(w, http.StatusOK, "ready")
	})
	if h.Metrics != nil {
		mux.Handle("GET /metrics", h.Metrics)
	}
	if h.Status != nil {
		mux.Handle("GET /{$}", statusPage(h.Status, log))
		mux.Handle("GET /status", statusJSON(h.Status, log))
	}
	return mux
}

func writePlain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, body)
}

// Start binds the address and serves in a goroutine owned by the server. It
// returns the bound address, so tests can listen on 127.0.0.1:0.
func (a *adminServer) Start() (net.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done != nil {
		return nil, errors.New("admin server already started")
	}
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		return nil, fmt.Errorf("admin listen on %s: %w", a.addr, err)
	}
	a.done = make(chan struct{})
	go a.serve(ln, a.done)
	a.log.Info("admin server listening", zap.Stringer("addr", ln.Addr()))
	return ln.Addr(), nil
}

func (a *adminServer) serve(ln net.Listener, done chan<- struct{}) {
	defer close(done)
	if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error("admin server stopped", zap.Error(err))
	}
}

// Shutdown stops accepting, lets in-flight requests finish until ctx ends, then
// closes what is left, and waits for the serving goroutine to return. Safe to
// call before Start and more than once.
func (a *adminServer) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	if done == nil {
		return nil
	}
	err := a.srv.Shutdown(ctx)
	if err != nil {
		// Deadline passed with requests still running: cut them off so the
		// goroutine below is guaranteed to finish.
		_ = a.srv.Close()
	}
	<-done
	if err != nil {
		return fmt.Errorf("admin shutdown: %w", err)
	}
	return nil
}
