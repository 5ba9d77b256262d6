package main

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	sorted := make([]int64, 1000)
	for i := range sorted {
		sorted[i] = int64(i + 1)
	}
	tests := []struct {
		q    float64
		want float64
	}{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}}
	for _, tt := range tests {
		if got := percentile(sorted, tt.q); got != tt.want {
			t.Errorf("percentile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := percentile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("percentile of nothing = %v, want NaN", got)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}}
	for _, tt := range tests {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	start := time.Now()
	res := sinkResult{
		start:  mark{at: start, msgs: 100, bytes: 6400, cpu: cpuMark{proxy: 10, self: 20}},
		end:    mark{at: start.Add(2 * time.Second), msgs: 400_100, bytes: 6400 + 400_000*64, cpu: cpuMark{proxy: 110, self: 120}},
		delays: []int64{3000, 1000, 2000},
	}
	got := summarize(res, true)
	// 400,000 messages in 2 s; the proxy used 100 ticks (1 s of CPU) in 2 s.
	if got.MsgsPerSec != 200_000 || got.MBPerSec != 12.8 {
		t.Errorf("rates %v msg/s, %v MB/s; want 200000, 12.8", got.MsgsPerSec, got.MBPerSec)
	}
	if got.ProxyCPU != 0.5 || got.CPUPer100k != 0.25 || got.BenchCPU != 0.5 {
		t.Errorf("cpu %v cores, %v per 100k, bench %v; want 0.5, 0.25, 0.5", got.ProxyCPU, got.CPUPer100k, got.BenchCPU)
	}
	if got.P50us != 2 || got.P99us != 3 {
		t.Errorf("p50 %v µs, p99 %v µs; want 2, 3", got.P50us, got.P99us)
	}
	if direct := summarize(res, false); direct.ProxyCPU != 0 || direct.CPUPer100k != 0 {
		t.Errorf("direct path has proxy CPU %v", direct.ProxyCPU)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("64, 1KiB,16KiB,2048B")
	if err != nil {
		t.Fatal(err)
	}
	want := []int{64, 1024, 16384, 2048}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("parseSizes = %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"10", "1GiB", "x", ""} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) succeeded", bad)
		}
	}
}

func TestSizeName(t *testing.T) {
	for n, want := range map[int]string{64: "64B", 1024: "1KiB", 16384: "16KiB", 1000: "1000B", 1 << 20: "1MiB"} {
		if got := sizeName(n); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", n, got, want)
		}
	}
}
