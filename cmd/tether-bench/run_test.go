package main

import (
	"context"
	"io"
	"math"
	"testing"
	"time"
)

// A short run of each mode through the direct path: real sockets, the feed and
// the sink as the benchmark uses them.
func TestRunDirect(t *testing.T) {
	f, err := startFeed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	const duration, warmup, rate = 600 * time.Millisecond, 100 * time.Millisecond, 2000
	r := &runner{feed: f, duration: duration, warmup: warmup, progress: io.Discard}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	direct := target{name: targetDirect, url: f.URL()}

	maxRes, err := r.run(ctx, direct, scenario{mode: modeMax, size: 1024}, 1)
	if err != nil {
		t.Fatalf("max run: %v", err)
	}
	// Loopback carries far more than the paced rate: a full-speed run that
	// does not is not running at full speed.
	if maxRes.MsgsPerSec < 10*rate || maxRes.Messages == 0 {
		t.Fatalf("max run: %v msg/s (%d messages)", maxRes.MsgsPerSec, maxRes.Messages)
	}

	rateRes, err := r.run(ctx, direct, scenario{mode: modeRate, size: 64, rate: rate}, 1)
	if err != nil {
		t.Fatalf("rate run: %v", err)
	}
	// The feed paces by the clock; a late timer sends the messages due
	// together, so the rate over the window stays within a few percent.
	if math.Abs(rateRes.MsgsPerSec-rate)/rate > 0.1 {
		t.Fatalf("rate run: %v msg/s, want %d ±10%%", rateRes.MsgsPerSec, rate)
	}
	if !(rateRes.P50us > 0 && rateRes.P50us <= rateRes.P99us && rateRes.P99us <= rateRes.P999us) {
		t.Fatalf("latency p50 %v, p99 %v, p99.9 %v µs: not ordered and positive", rateRes.P50us, rateRes.P99us, rateRes.P999us)
	}
	if err := f.waitIdle(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}
