package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tetherproxy/tether/internal/budget"
)

// The tether_memory_* series read the budget at each scrape: 0 before it
// is set, then what it holds.
func TestMemorySource(t *testing.T) {
	reg, m := newMetrics(t)
	const names = "tether_memory_budget_bytes tether_memory_used_bytes tether_memory_pauses_total tether_memory_paused_sessions"
	zero := `
# HELP tether_memory_used_bytes Bytes tether buffers now against the memory budget, across sessions.
# TYPE tether_memory_used_bytes gauge
tether_memory_used_bytes 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(zero), "tether_memory_used_bytes"); err != nil {
		t.Error(err)
	}
	b, err := budget.New(budget.Options{Limit: 1000, Share: 100, Sessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	m.SetMemorySource(b)
	a := b.Open()
	a.TryReserve(300)
	a.Paused()
	want := `
# HELP tether_memory_budget_bytes The memory budget of everything tether buffers for its sessions (TETHER_MEMORY_LIMIT).
# TYPE tether_memory_budget_bytes gauge
tether_memory_budget_bytes 1000
# HELP tether_memory_paused_sessions Sessions whose upstream reads the full memory budget pauses now.
# TYPE tether_memory_paused_sessions gauge
tether_memory_paused_sessions 1
# HELP tether_memory_pauses_total Times a session's upstream reads paused because the memory budget was full.
# TYPE tether_memory_pauses_total counter
tether_memory_pauses_total 1
# HELP tether_memory_used_bytes Bytes tether buffers now against the memory budget, across sessions.
# TYPE tether_memory_used_bytes gauge
tether_memory_used_bytes 300
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), strings.Fields(names)...); err != nil {
		t.Error(err)
	}
}
