package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// report is everything a run of the tool measured; it is printed as tables and
// written as JSON.
type report struct {
	Started  time.Time         `json:"started"`
	Command  string            `json:"command"`
	Machine  machine           `json:"machine"`
	Duration string            `json:"duration_per_run"`
	Warmup   string            `json:"warmup"`
	Rounds   int               `json:"rounds"`
	Rate     int               `json:"latency_rate_msgs_per_sec"`
	Tether   string            `json:"tether_binary,omitempty"`
	Seq      bool              `json:"tether_sequencing"`
	Env      map[string]string `json:"tether_env,omitempty"`
	Nginx    string            `json:"nginx_version,omitempty"`
	Series   []*series         `json:"series"`
	Idle     []idleResult      `json:"idle,omitempty"`
	Checks   []check           `json:"targets"`
	Notes    []string          `json:"notes,omitempty"`
}

type machine struct {
	CPUs      int    `json:"cpus"`
	CPU       string `json:"cpu"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go"`
}

// check is one of the performance targets, with what was measured.
type check struct {
	Target   string  `json:"target"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Met      bool    `json:"met"`
}

func (r *report) find(target, mode string, size int) *series {
	for _, s := range r.Series {
		if s.Target == target && s.Mode == mode && s.Size == size {
			return s
		}
	}
	return nil
}

func (r *report) sizes() []int {
	var sizes []int
	seen := map[int]bool{}
	for _, s := range r.Series {
		if !seen[s.Size] {
			seen[s.Size] = true
			sizes = append(sizes, s.Size)
		}
	}
	return sizes
}

func (r *report) targets() []string {
	var names []string
	for _, t := range allTargets {
		for _, s := range r.Series {
			if s.Target == t {
				names = append(names, t)
				break
			}
		}
	}
	return names
}

// ratio is a/b, NaN when either is missing.
func ratio(a, b *series, f func(runResult) float64) float64 {
	if a == nil || b == nil || f(b.Median) == 0 {
		return math.NaN()
	}
	return f(a.Median) / f(b.Median)
}

func msgsPerSec(r runResult) float64 { return r.MsgsPerSec }

// addedP99 is the p99 latency a target adds to the direct path, in µs.
func (r *report) added(target string, size int, f func(runResult) float64) float64 {
	t, d := r.find(target, "rate", size), r.find(targetDirect, "rate", size)
	if t == nil || d == nil {
		return math.NaN()
	}
	return f(t.Median) - f(d.Median)
}

func p50(r runResult) float64 { return r.P50us }
func p99(r runResult) float64 { return r.P99us }

// checks evaluates the performance targets on the medians: tether against
// nginx with 64k buffers measured in the same rounds (its paths skipped, so
// are these checks), and the idle session's cost.
func (r *report) checks() []check {
	var out []check
	for _, size := range r.sizes() {
		tether, ref := r.find(targetTether, "max", size), r.find(targetNginx64k, "max", size)
		if vs := ratio(tether, ref, msgsPerSec); !math.IsNaN(vs) {
			out = append(out, check{fmt.Sprintf("maximum throughput %s ≥ 1.0× nginx-64k", sizeName(size)),
				fmt.Sprintf("%.2f× nginx-64k", vs), vs, vs >= 1})
		}
		at, an := r.added(targetTether, size, p99), r.added(targetNginx64k, size, p99)
		if !math.IsNaN(at) && !math.IsNaN(an) {
			out = append(out, check{fmt.Sprintf("added p99 at %d msg/s, %s, ≤ nginx-64k's", r.Rate, sizeName(size)),
				fmt.Sprintf("tether %+.1f µs, nginx-64k %+.1f µs", at, an), at, at <= an})
		}
		if vs := ratio(tether, ref, cpuPer100k); !math.IsNaN(vs) {
			out = append(out, check{fmt.Sprintf("proxy CPU per 100k msg/s at maximum throughput, %s, ≤ 2× nginx-64k's", sizeName(size)),
				fmt.Sprintf("%s against %s cores (%.1f×)", cpuFigure(tether.Median.CPUPer100k),
					cpuFigure(ref.Median.CPUPer100k), vs), vs, vs <= 2})
		}
	}
	for _, idle := range r.Idle {
		if idle.Target != targetTether {
			continue
		}
		out = append(out, check{fmt.Sprintf("RSS per idle session at %d sessions ≤ 16 KiB", idle.Sessions),
			fmt.Sprintf("%.1f KiB", idle.PerSessionKiB), idle.PerSessionKiB, idle.PerSessionKiB <= 16})
		if idle.GoroutinesPerSess != 0 {
			out = append(out, check{"goroutines per idle session ≤ 3",
				fmt.Sprintf("%.1f", idle.GoroutinesPerSess), idle.GoroutinesPerSess, idle.GoroutinesPerSess <= 3})
		}
	}
	return out
}

func cpuPer100k(r runResult) float64 { return r.CPUPer100k }

// print writes the report as Markdown tables.
func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\n%d CPUs (%s), Linux %s, %s; %s per run (first %s excluded), median of %d rounds",
		r.Machine.CPUs, r.Machine.CPU, r.Machine.Kernel, r.Machine.GoVersion, r.Duration, r.Warmup, r.Rounds)
	if r.Nginx != "" {
		fmt.Fprintf(w, "; %s", r.Nginx)
	}
	fmt.Fprintf(w, "; tether sequencing %s\n", onOff(r.Seq))
	r.printThroughput(w)
	r.printLatency(w)
	r.printIdle(w)
	r.printChecks(w)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off (the binary has no TETHER_SEQ_PATH)"
}

func (r *report) printThroughput(w io.Writer) {
	fmt.Fprintf(w, "\nMaximum throughput (messages received per second by the sink)\n\n")
	fmt.Fprintln(w, "| size | path | msg/s | MB/s | × direct | proxy CPU (cores) | proxy CPU per 100k msg/s |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|")
	for _, size := range r.sizes() {
		direct := r.find(targetDirect, "max", size)
		for _, t := range r.targets() {
			s := r.find(t, "max", size)
			if s == nil {
				continue
			}
			m := s.Median
			fmt.Fprintf(w, "| %s | %s | %s | %.1f | %s | %s | %s |\n", sizeName(size), t, thousands(m.MsgsPerSec),
				m.MBPerSec, times(ratio(s, direct, msgsPerSec)), cores(m.ProxyCPU, t), perHundredK(m.CPUPer100k, t))
		}
	}
}

func (r *report) printLatency(w io.Writer) {
	fmt.Fprintf(w, "\nLatency at %s msg/s (µs from the sender's timestamp to receipt)\n\n", thousands(float64(r.Rate)))
	fmt.Fprintln(w, "| size | path | p50 | p99 | p99.9 | added p50 | added p99 | proxy CPU per 100k msg/s |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, size := range r.sizes() {
		for _, t := range r.targets() {
			s := r.find(t, "rate", size)
			if s == nil {
				continue
			}
			m := s.Median
			a50, a99 := "", ""
			if t != targetDirect {
				a50, a99 = signed(r.added(t, size, p50)), signed(r.added(t, size, p99))
			}
			fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.1f | %s | %s | %s |\n", sizeName(size), t,
				m.P50us, m.P99us, m.P999us, a50, a99, perHundredK(m.CPUPer100k, t))
		}
	}
}

func (r *report) printIdle(w io.Writer) {
	if len(r.Idle) == 0 {
		return
	}
	fmt.Fprintf(w, "\nIdle sessions (resident memory)\n\n")
	fmt.Fprintln(w, "| path | sessions | RSS before | RSS after | per session | Go heap per session | stacks per session | goroutines per session |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, i := range r.Idle {
		heap, stack, g := "", "", ""
		if i.HeapPerSessionKiB != 0 || i.StackPerSessionKiB != 0 {
			heap = fmt.Sprintf("%.1f KiB", i.HeapPerSessionKiB)
			stack = fmt.Sprintf("%.1f KiB", i.StackPerSessionKiB)
			g = fmt.Sprintf("%.1f", i.GoroutinesPerSess)
		}
		fmt.Fprintf(w, "| %s | %d | %.1f MiB | %.1f MiB | %.1f KiB | %s | %s | %s |\n", i.Target, i.Sessions,
			float64(i.RSSBefore)/(1<<20), float64(i.RSSAfter)/(1<<20), i.PerSessionKiB, heap, stack, g)
	}
	fmt.Fprintf(w, "\nMeasured as: %s.\n", idleMethod)
}

func (r *report) printChecks(w io.Writer) {
	if len(r.Checks) == 0 {
		return
	}
	fmt.Fprintf(w, "\nTargets, on the medians\n\n| target | measured | |\n|---|---|---|\n")
	for _, c := range r.Checks {
		verdict := "met"
		if !c.Met {
			verdict = "**missed**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", c.Target, c.Measured, verdict)
	}
}

func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func times(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return fmt.Sprintf("%.2f×", v)
}

func cores(v float64, target string) string {
	if target == targetDirect {
		return ""
	}
	return fmt.Sprintf("%.2f", v)
}

// perHundredK prints CPU per 100k msg/s to three significant figures: a
// proxy that only copies bytes needs a few thousandths of a core there at
// small sizes, which two decimals round to nothing.
func perHundredK(v float64, target string) string {
	if target == targetDirect {
		return ""
	}
	return cpuFigure(v)
}

func cpuFigure(v float64) string {
	if v >= 1 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func signed(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return fmt.Sprintf("%+.1f", v)
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
