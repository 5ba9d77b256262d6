package demo

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// catchUpPath is the WebSocket feed's HTTP catch-up endpoint, what
// TETHER_GAPFILL_URL points at: GET /catchup?from=F&to=T answers the kept
// events in that range as NDJSON.
const catchUpPath = "/catchup"

// serveCatchUp answers a catch-up request.
func (f *wsFeed) serveCatchUp(w http.ResponseWriter, r *http.Request) {
	from, err1 := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
	to, err2 := strconv.ParseInt(r.URL.Query().Get("to"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		http.Error(w, "from and to must be integers", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	events := slices.Clone(f.prices.events(from, to))
	f.stats.served += int64(len(events))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	for _, ev := range events {
		_, _ = fmt.Fprintln(w, ev)
	}
}
