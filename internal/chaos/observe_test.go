package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetherproxy/tether/internal/binarytest"
)

// watcher reads tether's upstream connection from outside the process: its
// state from the admin /status, its losses from
// tether_upstream_disconnects_total. It is called from the fault injector,
// which cannot fail the test: the first error is kept for the test to
// report.
type watcher struct {
	p *binarytest.Process

	mu  sync.Mutex
	err error
}

// now reports whether the soak's one session's upstream is confirmed and how
// many upstream connections tether has lost so far; on an error, not up.
func (w *watcher) now() (up bool, lost int) {
	ctx := context.Background()
	body, err := w.p.Get(ctx, "/status")
	if err != nil {
		w.fail(err)
		return false, 0
	}
	var doc struct {
		Sessions []struct {
			State string `json:"state"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		w.fail(fmt.Errorf("/status: %w", err))
		return false, 0
	}
	m, err := w.p.Metrics(ctx)
	if err != nil {
		w.fail(err)
		return false, 0
	}
	up = len(doc.Sessions) == 1 && doc.Sessions[0].State == "confirmed"
	return up, int(m["tether_upstream_disconnects_total"])
}

func (w *watcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *watcher) firstErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// longestOutage reads, from tether_reconnect_seconds (loss of a confirmed
// connection → confirmation of the next), the upper bound of the bucket
// holding the longest outage; 0 when there was none.
func longestOutage(m map[string]float64) time.Duration {
	total := m["tether_reconnect_seconds_count"]
	if total == 0 {
		return 0
	}
	longest := math.Inf(1)
	for series, n := range m {
		le, ok := strings.CutPrefix(series, `tether_reconnect_seconds_bucket{le="`)
		if !ok || n < total {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSuffix(le, `"}`), 64); err == nil {
			longest = math.Min(longest, v)
		}
	}
	if math.IsInf(longest, 1) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(longest * float64(time.Second))
}

// formatCounts prints a map as "k=v, ..." in key order.
func formatCounts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
