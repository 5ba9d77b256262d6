package demo

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// catchUpServer is the feed's HTTP catch-up endpoint on 127.0.0.1:0, what
// TETHER_GAPFILL_URL points at: GET /catchup?from=F&to=T answers the kept
// events in that range as NDJSON.
type catchUpServer struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
}

func startCatchUp(events func(from, to int64) []string) (*catchUpServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("catch-up endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /catchup", func(w http.ResponseWriter, r *http.Request) {
		from, err1 := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
		to, err2 := strconv.ParseInt(r.URL.Query().Get("to"), 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			http.Error(w, "from and to must be integers", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, ev := range events(from, to) {
			_, _ = fmt.Fprintln(w, ev)
		}
	})
	s := &catchUpServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after close
	}()
	return s, nil
}

func (s *catchUpServer) url() string { return "http://" + s.ln.Addr().String() + "/catchup" }

// close stops the server at once and waits for it.
func (s *catchUpServer) close() {
	_ = s.srv.Close()
	<-s.done
}

// serveCatchUp returns the kept events numbered from to to.
func (f *feed) serveCatchUp(from, to int64) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	oldest := f.stats.published - int64(len(f.history)) + 1
	var out []string
	for seq := max(from, oldest); seq <= min(to, f.stats.published); seq++ {
		out = append(out, f.history[seq-oldest])
	}
	f.stats.served += int64(len(out))
	return out
}
