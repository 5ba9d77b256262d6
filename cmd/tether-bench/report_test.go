package main

import (
	"strings"
	"testing"
)

// The targets are judged against nginx with 64k buffers measured in the same
// rounds, each on its own figure: a run where tether wins one and loses
// another says so for each.
func TestChecksAgainstNginx64k(t *testing.T) {
	med := func(target, mode string, r runResult) *series {
		return &series{Target: target, Mode: mode, Size: 1024, Median: r}
	}
	rep := &report{Rate: 10000, Series: []*series{
		med(targetDirect, "max", runResult{MsgsPerSec: 2e6}),
		med(targetTether, "max", runResult{MsgsPerSec: 9e5, CPUPer100k: 0.15}),
		med(targetNginx64k, "max", runResult{MsgsPerSec: 8e5, CPUPer100k: 0.07}),
		med(targetDirect, "rate", runResult{P99us: 100}),
		med(targetTether, "rate", runResult{P99us: 900}),
		med(targetNginx64k, "rate", runResult{P99us: 1000}),
	}, Idle: []idleResult{{Target: targetTether, Sessions: 5000, PerSessionKiB: 17.2, GoroutinesPerSess: 3}}}

	got := map[string]check{}
	for _, c := range rep.checks() {
		got[c.Target] = c
	}
	want := []struct {
		target string
		met    bool
		value  float64
	}{
		{"maximum throughput 1KiB ≥ 1.0× nginx-64k", true, 9.0 / 8},
		{"added p99 at 10000 msg/s, 1KiB, ≤ nginx-64k's", true, 800},
		{"proxy CPU per 100k msg/s at maximum throughput, 1KiB, ≤ 2× nginx-64k's", false, 0.15 / 0.07},
		{"RSS per idle session at 5000 sessions ≤ 16 KiB", false, 17.2},
		{"goroutines per idle session ≤ 3", true, 3},
	}
	if len(got) != len(want) {
		t.Errorf("%d checks, want %d: %v", len(got), len(want), got)
	}
	for _, w := range want {
		c, ok := got[w.target]
		switch {
		case !ok:
			t.Errorf("no check %q", w.target)
		case c.Met != w.met || c.Value < w.value*0.999 || c.Value > w.value*1.001:
			t.Errorf("%q: met %v value %v, want %v %v", w.target, c.Met, c.Value, w.met, w.value)
		}
	}

	// Without nginx in the run there is nothing to judge the proxy paths by.
	rep.Series = rep.Series[:2]
	for _, c := range rep.checks() {
		if strings.Contains(c.Target, "nginx") {
			t.Errorf("check %q without nginx-64k measured", c.Target)
		}
	}
}

// CPU per 100k msg/s keeps three significant figures: nginx at 64 B needs a
// few thousandths of a core there, which two decimals print as nothing.
func TestCPUFigure(t *testing.T) {
	for v, want := range map[float64]string{0.00424: "0.00424", 0.2: "0.2", 0.0812: "0.0812", 2.304: "2.30"} {
		if got := cpuFigure(v); got != want {
			t.Errorf("cpuFigure(%v) = %q, want %q", v, got, want)
		}
	}
}
