package main

import (
	"context"
	"io"
	"math"
	"testing"
	"time"
)

// A short run of each mode through the direct path: real sockets, the feed and
// the sink as the benchmark uses them. The test checks what a run must do
// whatever the machine's speed: it completes, the sink saw every message once
// and in order (it fails the run otherwise), the window holds messages, is
// no shorter than asked (timers never fire early), and msg/s derives from
// its count. How fast loopback carries them, and how close the paced
// rate comes, are figures for the benchmark's report: asserted here they
// measured the scheduler of a loaded CI machine.
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

	for _, sc := range []scenario{{mode: modeMax, size: 1024}, {mode: modeRate, size: 64, rate: rate}} {
		res, err := r.run(ctx, direct, sc, 1)
		if err != nil {
			t.Fatalf("%v run: %v", sc.mode, err)
		}
		t.Logf("%v run: %d messages in %.3fs, %.0f msg/s", sc.mode, res.Messages, res.Seconds, res.MsgsPerSec)
		checkCounts(t, sc, res, duration-warmup)
	}
	if err := f.waitIdle(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// checkCounts checks that a run's window holds messages, lasted at least
// window, that its message rate is what its count makes it, and that its
// latencies are ordered.
func checkCounts(t *testing.T, sc scenario, res runResult, window time.Duration) {
	t.Helper()
	if res.Messages <= 0 {
		t.Errorf("%v run: %d messages in the window", sc.mode, res.Messages)
	}
	if res.Seconds < window.Seconds() {
		t.Errorf("%v run: a window of %.3fs, shorter than the %v asked", sc.mode, res.Seconds, window)
	}
	if want := float64(res.Messages) / res.Seconds; !nearlyEqual(res.MsgsPerSec, want) {
		t.Errorf("%v run: %v msg/s, want messages/seconds = %v", sc.mode, res.MsgsPerSec, want)
	}
	// MB/s is not checked against the count: a mark loads the message and
	// byte counters one after the other while the reader goes on, so under
	// load they disagree (measured: 40% at load 27).
	if sc.mode != modeRate {
		return
	}
	if !(res.P50us > 0 && res.P50us <= res.P99us && res.P99us <= res.P999us) {
		t.Errorf("latency p50 %v, p99 %v, p99.9 %v µs: not ordered and positive", res.P50us, res.P99us, res.P999us)
	}
}

// nearlyEqual reports a and b equal but for floating-point rounding.
func nearlyEqual(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
