package metrics

import "github.com/prometheus/client_golang/prometheus"

// MemorySource is the memory budget (internal/budget's Budget) as the
// tether_memory_* series read it at each scrape.
type MemorySource interface {
	Limit() int64
	Used() int64
	Pauses() uint64
	Waiting() int64
}

// memoryCollectors are the tether_memory_* series, read from the source set
// with SetMemorySource; each reads 0 until it is set.
func (m *Metrics) memoryCollectors() []prometheus.Collector {
	read := func(f func(MemorySource) float64) func() float64 {
		return func() float64 {
			if s := m.memory.Load(); s != nil {
				return f(*s)
			}
			return 0
		}
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tether_memory_budget_bytes",
			Help: "The memory budget of everything tether buffers for its sessions (TETHER_MEMORY_LIMIT).",
		}, read(func(s MemorySource) float64 { return float64(s.Limit()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tether_memory_used_bytes",
			Help: "Bytes tether buffers now against the memory budget, across sessions.",
		}, read(func(s MemorySource) float64 { return float64(s.Used()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tether_memory_pauses_total",
			Help: "Times a session's upstream reads paused because the memory budget was full.",
		}, read(func(s MemorySource) float64 { return float64(s.Pauses()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tether_memory_paused_sessions",
			Help: "Sessions whose upstream reads the full memory budget pauses now.",
		}, read(func(s MemorySource) float64 { return float64(s.Waiting()) })),
	}
}

// SetMemorySource sets the memory budget the tether_memory_* series read.
func (m *Metrics) SetMemorySource(s MemorySource) { m.memory.Store(&s) }
