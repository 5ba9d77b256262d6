package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/binarytest"
)

// heapEvery is how often the sampler reads tether's live heap: a few
// hundred samples over the default soak, each a scrape tether answers in
// well under a millisecond.
const heapEvery = 200 * time.Millisecond

// heapSample is tether's live heap (go_gc_heap_live_bytes: what its last GC
// found reachable) at a moment of the soak.
type heapSample struct {
	at   time.Duration // since the sampler started
	live float64       // bytes
}

// heapSampler scrapes tether's admin /metrics every heapEvery until
// stopped. Its goroutine cannot fail the test: the first error is kept.
type heapSampler struct {
	p     *binarytest.Process
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	samples []heapSample
	err     error
}

func startHeapSampler(p *binarytest.Process) *heapSampler {
	h := &heapSampler{p: p, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go h.run()
	return h
}

func (h *heapSampler) run() {
	defer close(h.done)
	tick := time.NewTicker(heapEvery)
	defer tick.Stop()
	for {
		h.sample()
		select {
		case <-h.stop:
			return
		case <-tick.C:
		}
	}
}

func (h *heapSampler) sample() {
	m, err := h.p.Metrics(context.Background())
	h.mu.Lock()
	defer h.mu.Unlock()
	live, ok := m["go_gc_heap_live_bytes"]
	switch {
	case err != nil && h.err == nil:
		h.err = err
	case err == nil && !ok && h.err == nil:
		h.err = fmt.Errorf("/metrics has no go_gc_heap_live_bytes")
	case err == nil && ok:
		h.samples = append(h.samples, heapSample{at: time.Since(h.start), live: live})
	}
}

// stopAndRead ends the sampler, waits for it and returns its samples and
// its first error.
func (h *heapSampler) stopAndRead() ([]heapSample, error) {
	close(h.stop)
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.samples, h.err
}

// floorWindows is how many windows the second half of the run is cut
// into; the lowest sample of each is the floor the trend is fitted to. The
// live heap changes only at a GC, every few seconds here: a window of the
// default soak's second half (about 5 s) sees a few.
const floorWindows = 4

// heapTrend is the least-squares line through the floor of tether's live
// heap over the second half of the run (the first half holds the start-up:
// pools, buffers and maps growing to their working size): the lowest
// sample of each of floorWindows windows. A GC that ran in the middle of a
// resume's replay or with the outbox full of an outage's messages finds
// more alive than one in a calm spell; the floor leaves those out, and a
// leak raises the floor with everything else.
type heapTrend struct {
	slope           float64 // bytes per second
	n               int     // samples in the second half
	floors          []float64
	lowest, highest float64
	from, to        time.Duration
}

func fitSecondHalf(samples []heapSample) (heapTrend, error) {
	if len(samples) < 2*floorWindows {
		return heapTrend{}, fmt.Errorf("%d heap samples, too few to fit a line through %d floors", len(samples), floorWindows)
	}
	end := samples[len(samples)-1].at
	tr := heapTrend{from: end / 2, to: end, lowest: samples[len(samples)-1].live, highest: samples[len(samples)-1].live}
	width := (end - end/2) / floorWindows
	floorAt := make([]heapSample, floorWindows)
	for _, s := range samples {
		if s.at < end/2 {
			continue
		}
		tr.n++
		tr.lowest, tr.highest = min(tr.lowest, s.live), max(tr.highest, s.live)
		w := min(int((s.at-end/2)/width), floorWindows-1)
		if floorAt[w].at == 0 || s.live < floorAt[w].live {
			floorAt[w] = s
		}
	}
	var sx, sy, sxx, sxy, n float64
	for w, f := range floorAt {
		if f.at == 0 {
			return heapTrend{}, fmt.Errorf("no heap sample in window %d of the second half", w)
		}
		x := f.at.Seconds()
		sx, sy, sxx, sxy, n = sx+x, sy+f.live, sxx+x*x, sxy+x*f.live, n+1
		tr.floors = append(tr.floors, f.live)
	}
	tr.slope = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return tr, nil
}

// leakPerMessage is the growth the heap check fails on, per message
// relayed: what keeping a copy of each costs (the soak's messages are 23 to
// 60 bytes, in Go's 32- to 64-byte size classes, plus whatever refers to
// them). Everything else tether holds is bounded by its configuration
// (outbox, hold, downstream queue, replay log) and so stops growing once
// the run has reached its working size. A smaller leak is within the
// noise of the default soak's floors (a few hundred KiB over its 20 s
// second half); a longer run (doc.go) reads a smaller slope.
const leakPerMessage = 64 // bytes

// checkHeap fails if the floor of tether's live heap rose, over the second
// half of the run, faster than leakPerMessage for every message relayed
// at the run's rate (relayed messages over the run's length), and logs the
// figures.
func checkHeap(t *testing.T, samples []heapSample, err error, relayed int, run time.Duration) {
	t.Helper()
	if err != nil {
		t.Errorf("sampling tether's heap: %v", err)
	}
	tr, err := fitSecondHalf(samples)
	if err != nil {
		t.Errorf("tether's heap: %v", err)
		return
	}
	rate := float64(relayed) / run.Seconds()
	limit := rate * leakPerMessage
	floors := make([]string, len(tr.floors))
	for i, f := range tr.floors {
		floors[i] = fmt.Sprintf("%.2f", f/(1<<20))
	}
	t.Logf("tether's live heap, second half (%v–%v, %d samples): %.2f–%.2f MiB, floors %s MiB, slope %+.2f KiB/s (limit %.2f KiB/s: %d bytes per message at %.0f messages/s)",
		tr.from.Round(time.Second), tr.to.Round(time.Second), tr.n, tr.lowest/(1<<20), tr.highest/(1<<20),
		strings.Join(floors, " "), tr.slope/1024, limit/1024, leakPerMessage, rate)
	if tr.slope > limit {
		t.Errorf("the floor of tether's live heap rises %.2f KiB/s over the second half of the soak, over the %.2f KiB/s of a leak of %d bytes per message relayed",
			tr.slope/1024, limit/1024, leakPerMessage)
	}
}
