package churn_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/binarytest"
)

// sample is tether's figures at one moment, read from outside the process.
type sample struct {
	goroutines int
	fds        int
	sessions   int
	rss        int64 // VmRSS, for the log
	// anon is RssAnon: the resident memory tether allocated, without its
	// binary's pages, which grow as more of its code runs (the churn's
	// resets and restarts run code an idle session never does).
	anon int64
	// idle is heap the runtime holds resident but unused (heap idle, not
	// yet released to the system): it returns it at its own pace, so RSS
	// less idle is what tether's memory is at the moment.
	idle int64
	live int64 // go_gc_heap_live_bytes: the heap the last GC kept
	gcs  int64 // GC cycles so far
	// inuse is the heap's in-use spans (go_memstats_heap_inuse_bytes),
	// stacks the goroutine stacks' (_stack_inuse_bytes, for the log).
	inuse, stacks int64
}

func (s sample) String() string {
	return fmt.Sprintf("goroutines %d, fds %d, sessions %d, RSS %.1f MiB, anonymous %.1f MiB (%.1f MiB idle heap), live heap %.2f MiB (after %d GCs), heap in use %.2f MiB, stacks %.2f MiB, resident %.1f MiB",
		s.goroutines, s.fds, s.sessions, mib(s.rss), mib(s.anon), mib(s.idle), mib(s.live), s.gcs, mib(s.inuse), mib(s.stacks), mib(s.resident()))
}

// resident is anonymous RSS less the heap's free room: idle spans, and in
// in-use spans what the live heap does not fill (see checkMemory).
func (s sample) resident() int64 { return s.anon - s.idle - (s.inuse - s.live) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// take reads the descriptors first, then scrapes, so the scrape's own
// connection is never among the descriptors counted.
func take(t *testing.T, p *binarytest.Process) sample {
	t.Helper()
	fds, err := p.OpenFDs()
	if err != nil {
		t.Fatalf("open descriptors: %v", err)
	}
	rss, err := p.RSS()
	if err != nil {
		t.Fatalf("RSS: %v", err)
	}
	anon, err := p.RssAnon()
	if err != nil {
		t.Fatalf("RSS: %v", err)
	}
	m, err := p.Metrics(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, p.Log())
	}
	for _, name := range []string{"go_goroutines", "go_gc_heap_live_bytes", "go_gc_duration_seconds_count", "tether_sessions",
		"go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes"} {
		if _, ok := m[name]; !ok {
			t.Fatalf("/metrics has no %s", name)
		}
	}
	return sample{
		goroutines: int(m["go_goroutines"]),
		fds:        fds,
		sessions:   int(m["tether_sessions"]),
		rss:        rss,
		anon:       anon,
		idle:       int64(m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"]),
		live:       int64(m["go_gc_heap_live_bytes"]),
		gcs:        int64(m["go_gc_duration_seconds_count"]),
		inuse:      int64(m["go_memstats_heap_inuse_bytes"]),
		stacks:     int64(m["go_memstats_stack_inuse_bytes"]),
	}
}

// gcWait bounds forceGC: each scrape allocates, so the heap reaches its
// goal within a few hundred of them.
const gcWait = 30 * time.Second

// forceGC has tether collect its heap twice from what it holds now, by
// scraping /metrics until the runtime has run two more GC cycles (each
// scrape allocates; tether has no endpoint that collects on demand, and a
// test should not give it one). The second cycle's live heap is measured
// with no churn garbage left, its goal set from the first's. The sample
// returned has the fewest goroutines and descriptors seen over those
// scrapes: the admin server's own work on a scrape may add one for a
// moment, where a leak is there in every sample.
func forceGC(t *testing.T, p *binarytest.Process) sample {
	t.Helper()
	start := take(t, p)
	least := start
	deadline := time.Now().Add(gcWait)
	for {
		s := take(t, p)
		least.goroutines, least.fds = min(least.goroutines, s.goroutines), min(least.fds, s.fds)
		if s.gcs >= start.gcs+2 {
			s.goroutines, s.fds = least.goroutines, least.fds
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("tether ran %d GC cycles in %v of scrapes, want 2", s.gcs-start.gcs, gcWait)
		}
	}
}

// baseline waits until endBound has passed since the last app left, when
// everything its session started has ended, checks that no session is
// left, and forces two GC cycles: that sample is the baseline.
func baseline(t *testing.T, p *binarytest.Process, left time.Time) sample {
	t.Helper()
	waitUntil(left.Add(endBound))
	if s := take(t, p); s.sessions != 0 {
		t.Fatalf("%v after the last app left, tether still has %v", endBound, s)
	}
	return forceGC(t, p)
}

// quiesce waits for every session to end and for the goroutines and
// descriptors to be back at base, at most endBound from when the last app
// left; then it forces two GC cycles and returns that sample.
func quiesce(t *testing.T, p *binarytest.Process, left time.Time, base sample) sample {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		s := take(t, p)
		if s.sessions == 0 && s.goroutines <= base.goroutines && s.fds <= base.fds {
			return forceGC(t, p)
		}
		if time.Since(left) > endBound {
			t.Errorf("%v after the last app left, tether still has %v", endBound, s)
			return forceGC(t, p)
		}
		<-tick.C
	}
}

// waitUntil returns at deadline.
func waitUntil(deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	<-t.C
}
