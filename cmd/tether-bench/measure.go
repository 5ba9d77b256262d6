package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

// Target names, in the order the tables show them.
const (
	targetDirect   = "direct"
	targetTether   = "tether"
	targetBaseline = "tether-base" // -tether-baseline, for before/after comparisons
	targetNginx    = "nginx"
	targetNginx64k = "nginx-64k"
)

var allTargets = []string{targetDirect, targetTether, targetBaseline, targetNginx, targetNginx64k}

// target is one path from the feed to the sink.
type target struct {
	name string
	url  string
	pids func() []int // processes whose CPU is the proxy's; nil for direct
}

// runResult is one run of one scenario through one target.
type runResult struct {
	Round      int     `json:"round"`
	Messages   int64   `json:"messages"`         // received in the window
	Seconds    float64 `json:"seconds"`          // length of the window
	MsgsPerSec float64 `json:"msgs_per_sec"`     // received
	MBPerSec   float64 `json:"mb_per_sec"`       // payload, 10^6 bytes
	P50us      float64 `json:"p50_us,omitempty"` // latency runs
	P99us      float64 `json:"p99_us,omitempty"`
	P999us     float64 `json:"p999_us,omitempty"`
	ProxyCPU   float64 `json:"proxy_cpu_cores"`           // CPU time of the proxy / wall time
	CPUPer100k float64 `json:"proxy_cpu_per_100k_msgs_s"` // cores per 100k msg/s
	BenchCPU   float64 `json:"bench_cpu_cores"`           // the feed and the sink
}

// runner runs scenarios against targets.
type runner struct {
	feed     *feed
	duration time.Duration
	warmup   time.Duration
	progress io.Writer
}

// run measures one scenario through one target.
func (r *runner) run(ctx context.Context, t target, sc scenario, round int) (runResult, error) {
	if err := r.feed.waitIdle(ctx, 10*time.Second); err != nil {
		return runResult{}, err
	}
	_ = r.feed.takeErr() // a failure after the last run ended is not this run's
	r.feed.set(sc)
	expect := 0
	if sc.mode == modeRate {
		expect = int(float64(sc.rate) * (r.duration - r.warmup).Seconds())
	}
	res, err := runSink(ctx, sinkConfig{
		url: t.url, duration: r.duration, warmup: r.warmup,
		latency: sc.mode == modeRate, expect: expect,
		cpu: func() cpuMark { return cpuMark{proxy: sumTicks(t.pids), self: sumTicks(selfPID)} },
	})
	if ferr := r.feed.takeErr(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return runResult{}, fmt.Errorf("%v %s through %s: %w", sc.mode, sizeName(sc.size), t.name, err)
	}
	out := summarize(res, t.pids != nil)
	out.Round = round
	return out, nil
}

func selfPID() []int { return []int{os.Getpid()} }

// sumTicks adds the CPU ticks of the processes pids returns (0 for nil).
func sumTicks(pids func() []int) int64 {
	if pids == nil {
		return 0
	}
	var total int64
	for _, pid := range pids() {
		if t, err := cpuTicks(pid); err == nil {
			total += t
		}
	}
	return total
}

// summarize turns the two marks and the delays into rates and percentiles.
func summarize(res sinkResult, proxied bool) runResult {
	secs := res.end.at.Sub(res.start.at).Seconds()
	msgs := res.end.msgs - res.start.msgs
	out := runResult{
		Messages:   msgs,
		Seconds:    secs,
		MsgsPerSec: float64(msgs) / secs,
		MBPerSec:   float64(res.end.bytes-res.start.bytes) / secs / 1e6,
		BenchCPU:   float64(res.end.cpu.self-res.start.cpu.self) / clockTicks / secs,
	}
	if proxied {
		out.ProxyCPU = float64(res.end.cpu.proxy-res.start.cpu.proxy) / clockTicks / secs
		if out.MsgsPerSec > 0 {
			out.CPUPer100k = out.ProxyCPU / (out.MsgsPerSec / 1e5)
		}
	}
	if len(res.delays) > 0 {
		d := slices.Clone(res.delays)
		slices.Sort(d)
		out.P50us = percentile(d, 0.50) / 1e3
		out.P99us = percentile(d, 0.99) / 1e3
		out.P999us = percentile(d, 0.999) / 1e3
	}
	return out
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return float64(sorted[min(max(i, 0), len(sorted)-1)])
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// series is every run of one scenario through one target, and their medians.
type series struct {
	Target string      `json:"target"`
	Mode   string      `json:"mode"`
	Size   int         `json:"size"`
	Rate   int         `json:"rate,omitempty"`
	Runs   []runResult `json:"runs"`
	Median runResult   `json:"median"`
}

// medianOf takes the median of every field separately over the runs.
func medianOf(runs []runResult) runResult {
	field := func(f func(runResult) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	return runResult{
		Messages:   int64(field(func(r runResult) float64 { return float64(r.Messages) })),
		Seconds:    field(func(r runResult) float64 { return r.Seconds }),
		MsgsPerSec: field(func(r runResult) float64 { return r.MsgsPerSec }),
		MBPerSec:   field(func(r runResult) float64 { return r.MBPerSec }),
		P50us:      field(func(r runResult) float64 { return r.P50us }),
		P99us:      field(func(r runResult) float64 { return r.P99us }),
		P999us:     field(func(r runResult) float64 { return r.P999us }),
		ProxyCPU:   field(func(r runResult) float64 { return r.ProxyCPU }),
		CPUPer100k: field(func(r runResult) float64 { return r.CPUPer100k }),
		BenchCPU:   field(func(r runResult) float64 { return r.BenchCPU }),
	}
}

// rounds runs every scenario through every target, rounds times. Within a
// round, the targets of one scenario run back to back, in an order rotated
// every round, so slow drifts of the machine (another tenant, thermal limits)
// touch every target alike.
func (r *runner) rounds(ctx context.Context, targets []target, scenarios []scenario, n int) ([]*series, error) {
	all := map[string]*series{}
	var order []*series
	for _, sc := range scenarios {
		for _, t := range targets {
			s := &series{Target: t.name, Mode: sc.mode.String(), Size: sc.size}
			if sc.mode == modeRate {
				s.Rate = sc.rate
			}
			all[seriesKey(t.name, sc)] = s
			order = append(order, s)
		}
	}
	for round := 1; round <= n; round++ {
		for _, sc := range scenarios {
			for i := range targets {
				t := targets[(i+round-1)%len(targets)]
				res, err := r.run(ctx, t, sc, round)
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(r.progress, "round %d/%d  %-4s %6s  %-9s  %s\n", round, n, sc.mode, sizeName(sc.size), t.name, res.brief(sc.mode))
				s := all[seriesKey(t.name, sc)]
				s.Runs = append(s.Runs, res)
			}
		}
	}
	for _, s := range order {
		s.Median = medianOf(s.Runs)
	}
	return order, nil
}

func seriesKey(target string, sc scenario) string {
	return fmt.Sprintf("%s/%v/%d", target, sc.mode, sc.size)
}

func (r runResult) brief(m mode) string {
	if m == modeRate {
		return fmt.Sprintf("%8.0f msg/s  p50 %7.1f µs  p99 %7.1f µs  p99.9 %7.1f µs  proxy %.2f cores",
			r.MsgsPerSec, r.P50us, r.P99us, r.P999us, r.ProxyCPU)
	}
	return fmt.Sprintf("%10.0f msg/s  %8.1f MB/s  proxy %.2f cores  bench %.2f cores",
		r.MsgsPerSec, r.MBPerSec, r.ProxyCPU, r.BenchCPU)
}

// sizeName prints 64 as 64B, 1024 as 1KiB, 16384 as 16KiB.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
