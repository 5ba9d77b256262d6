package memload

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

// The scenario's sizes. The budget is far below what the sessions' queues
// could hold without it (TETHER_DOWNSTREAM_BUFFER_BYTES, 16MiB each by
// default: 256MiB for 16 paused apps).
const (
	messageSize = 16 << 10
	memoryLimit = 64 << 20
	maxSessions = 256
	shareBytes  = 64 << 10
	// The floods last at least floodFor, until what the paused apps'
	// upstreams send has not grown for steadyFor or the budget has paused
	// them for steadyFor, and at most floodMax (a loaded machine).
	floodFor    = 2 * time.Second
	steadyFor   = time.Second
	floodMax    = 30 * time.Second
	sampleEvery = 20 * time.Millisecond
	scrapeEvery = 250 * time.Millisecond
	// drainWait bounds the apps reading the rest of their streams once
	// the floods stop: at most the budget and the kernel's socket buffers.
	drainWait = 30 * time.Second
)

// runtimeOverhead is what tether's resident set may hold beyond the budget:
// the GOMEMLIMIT headroom tether adds (32MiB: its heap beside the buffers,
// read buffers of messages in flight, goroutine stacks), the runtime's own
// memory and the binary, and perSession for each session's sockets,
// goroutines and read buffers.
const (
	runtimeOverhead = 48 << 20
	perSession      = 128 << 10
)

// 16 apps that read nothing while their upstreams flood: tether's resident
// set stays within TETHER_MEMORY_LIMIT plus the runtime overhead, each
// session paused at its share of the budget, none lost, and each app gets
// its whole stream once it reads.
func TestPausedAppsStayWithinBudget(t *testing.T) {
	runScenario(t, slices.Repeat([]speed{paused}, 16))
}

// 200 sessions of mixed speeds, a quarter paused, a quarter slow, half
// fast: the same bound, and the fast and slow ones keep flowing while the
// paused ones hold the budget.
func TestMixedSessionsStayWithinBudget(t *testing.T) {
	var speeds []speed
	for i := range 200 {
		speeds = append(speeds, []speed{paused, slow, fast, fast}[i%4])
	}
	runScenario(t, speeds)
}

// fastCount is what the upstream of a fast app sends (4MiB): it keeps the
// work of forwarding bounded on a CI machine of 2 cores. The upstreams of
// paused and slow apps flood until the sampling ends, held back by tether.
const fastCount = 256

// runScenario connects an app of each speed, floods every upstream
// connection, samples tether's VmRSS until what the upstreams of the
// paused apps send has stopped growing (back-pressure reached them:
// everything tether would buffer for them is buffered), then lets every
// app read its stream to the end.
func runScenario(t *testing.T, speeds []speed) {
	baseline := os.Getenv("TETHER_MEMLOAD_BIN") != ""
	var held []int // the connections of paused apps, whose upstreams tether holds back
	for i, s := range speeds {
		if s == paused {
			held = append(held, i)
		}
	}
	f := newFlooder(t, messageSize, func(i int) int {
		if speeds[i] == fast {
			return fastCount
		}
		return 0
	})
	env := []string{"TETHER_LOG_LEVEL=info", fmt.Sprintf("TETHER_MAX_SESSIONS=%d", maxSessions)}
	if !baseline {
		env = append(env,
			fmt.Sprintf("TETHER_MEMORY_LIMIT=%d", memoryLimit),
			fmt.Sprintf("TETHER_MEMORY_SHARE_BYTES=%d", shareBytes))
	}
	tt := startTether(t, f.url(), env...)
	idle, err := tt.rss()
	if err != nil {
		t.Fatal(err)
	}
	apps := make([]*app, len(speeds))
	for i, s := range speeds {
		apps[i] = dialApp(t, "ws://"+tt.addr+"/", s)
		awaitCond(t, startWait, fmt.Sprintf("upstream connection %d", i+1), func() bool { return f.connections() == i+1 })
	}

	f.start()
	began := time.Now()
	peak, peakUsed := sample(t, tt, func() int { return f.sentTo(held) }, len(held))
	flooded := time.Since(began).Round(time.Millisecond)
	m := tt.metrics(t)
	peakUsed = max(peakUsed, int64(m["tether_memory_used_bytes"]))
	flowing := progress(apps)

	drainStart := time.Now()
	for _, a := range apps {
		a.start()
	}
	sent := f.halt()
	for i, a := range apps {
		awaitCond(t, drainWait, fmt.Sprintf("app %d (%v) reading its %d messages", i, a.speed, sent[i]),
			func() bool { return a.got.Load() >= int64(sent[i]) || a.dead() })
		if a.dead() { // its error is safe to read once it has ended
			t.Errorf("app %d (%v): its stream ended: %v", i, a.speed, a.err)
		}
		if got := a.got.Load(); got != int64(sent[i]) {
			t.Errorf("app %d (%v): got %d messages in order, the upstream sent %d", i, a.speed, got, sent[i])
		}
	}
	end := tt.metrics(t)
	t.Logf("the apps read the rest of their streams (%d messages) in %v", sum(sent), time.Since(drainStart).Round(time.Millisecond))

	bound := int64(memoryLimit + runtimeOverhead + perSession*len(speeds))
	t.Logf("%d sessions (%s): VmRSS idle %s, peak %s while flooding for %v; bound %s (budget %s + %s + %s per session); "+
		"budget used at most %s, %v pauses, %v sessions paused at the end of the flood; messages read while flooding: %s",
		len(speeds), mix(speeds), mib(idle), mib(peak), flooded, mib(bound), mib(memoryLimit), mib(runtimeOverhead), mib(perSession),
		mib(peakUsed), m["tether_memory_pauses_total"], m["tether_memory_paused_sessions"], flowing)
	if n := f.lost.Load(); n > 0 {
		t.Errorf("%d upstream connections lost", n)
	}
	if n := f.connections(); n != len(speeds) {
		t.Errorf("upstream accepted %d connections, want %d: one per session, none redialled", n, len(speeds))
	}
	for _, name := range []string{"tether_upstream_disconnects_total", "tether_app_dropped_total", "tether_outbox_dropped_total"} {
		if v := end[name]; v != 0 {
			t.Errorf("%s = %v, want 0", name, v)
		}
	}
	if baseline {
		t.Logf("TETHER_MEMLOAD_BIN set: measuring that binary without a budget; the RSS bound is not checked")
		return
	}
	if peak > bound {
		t.Errorf("tether's VmRSS reached %s, over TETHER_MEMORY_LIMIT (%s) + the runtime overhead (%s)", mib(peak), mib(memoryLimit), mib(bound-memoryLimit))
	}
	if peakUsed > memoryLimit {
		t.Errorf("tether_memory_used_bytes reached %s, over its %s budget", mib(peakUsed), mib(memoryLimit))
	}
	if m["tether_memory_pauses_total"] == 0 {
		t.Error("no session paused: the floods never filled the budget, the scenario tested nothing")
	}
	for i, a := range apps {
		if a.speed != paused && flowingAt(a) == 0 {
			t.Errorf("app %d (%v) read nothing while the budget was full", i, a.speed)
		}
	}
	if lines := tt.logged("memory budget full: sessions holding more than their share pause their upstream reads"); len(lines) == 0 {
		t.Error("no log line said the budget was full")
	}
}

// sample reads tether's VmRSS every sampleEvery, and its budget's use every
// scrapeEvery, and returns the highest of each: for floodFor at least, then
// until sent has not changed for steadyFor or the budget has paused at
// least pausedApps sessions for steadyFor, within floodMax.
func sample(t *testing.T, tt *tether, sent func() int, pausedApps int) (peakRSS, peakUsed int64) {
	t.Helper()
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	start := time.Now()
	last, lastChange, scraped := -1, start, time.Time{}
	var fullSince time.Time // every paused app's session waits for the budget
	for {
		rss, err := tt.rss()
		if err != nil {
			t.Fatal(err)
		}
		peakRSS = max(peakRSS, rss)
		now := time.Now()
		if now.Sub(scraped) >= scrapeEvery {
			m := tt.metrics(t)
			peakUsed = max(peakUsed, int64(m["tether_memory_used_bytes"]))
			switch {
			case m["tether_memory_paused_sessions"] < float64(pausedApps):
				fullSince = time.Time{}
			case fullSince.IsZero():
				fullSince = now
			}
			scraped = now
		}
		if n := sent(); n != last {
			last, lastChange = n, now
		}
		switch {
		case now.Sub(start) >= floodFor && !fullSince.IsZero() && now.Sub(fullSince) >= steadyFor:
			return peakRSS, peakUsed
		case now.Sub(start) >= floodMax:
			// Slow sessions give pool bytes back as their apps read,
			// and paused ones may take them: what the paused
			// upstreams send creeps on, under the same bound.
			t.Logf("the paused apps' upstreams still sent after %v", floodMax)
			return peakRSS, peakUsed
		case now.Sub(start) >= floodFor && now.Sub(lastChange) >= steadyFor:
			return peakRSS, peakUsed
		}
		<-tick.C
	}
}

func awaitCond(t *testing.T, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within %v", what, wait)
		}
	}
}

// progress records how far each app had read when the floods stopped.
func progress(apps []*app) string {
	var bySpeed [3]int64
	for _, a := range apps {
		a.atFlood = a.got.Load()
		bySpeed[a.speed] += a.atFlood
	}
	return fmt.Sprintf("fast %d, slow %d, paused %d", bySpeed[fast], bySpeed[slow], bySpeed[paused])
}

func flowingAt(a *app) int64 { return a.atFlood }

func mix(speeds []speed) string {
	var n [3]int
	for _, s := range speeds {
		n[s]++
	}
	return fmt.Sprintf("%d paused, %d slow, %d fast", n[paused], n[slow], n[fast])
}

func mib(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }

func (s speed) String() string { return [...]string{"fast", "slow", "paused"}[s] }

func sum(ns []int) (s int) {
	for _, n := range ns {
		s += n
	}
	return s
}
