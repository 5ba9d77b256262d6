package chaos_test

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// Fault kinds, as counted in the summary.
const (
	faultLatency   = "latency"
	faultBlackhole = "blackhole"
	faultReset     = "reset"
	faultSlice     = "slice"
	faultBandwidth = "bandwidth"
	faultClose1001 = "close 1001"
	faultClose1012 = "close 1012"
	faultRefuse503 = "handshake 503"
)

// blackholeMin is the shortest blackhole: the heartbeat's detection bound,
// pingInterval+pingTimeout, plus room for the scheduler under -race.
const blackholeMin = pingInterval + pingTimeout + 300*time.Millisecond

var faultKinds = []string{
	faultLatency, faultBlackhole, faultReset, faultSlice, faultBandwidth,
	faultClose1001, faultClose1012, faultRefuse503,
}

// injector applies random faults, one at a time with a calm spell between
// them so the stream makes progress, until stopped. Every random choice
// comes from rng, so a seed replays the same schedule (the timing of tether
// and the scheduler does not replay).
type injector struct {
	rng   *rand.Rand
	proxy *upstreamtest.FaultProxy
	feed  *feed
	watch *watcher

	// Written by the injector goroutine, read after stopAndHeal.
	counts     map[string]int
	undetected int // blackholes of a confirmed connection the heartbeat missed

	stop chan struct{}
	wg   sync.WaitGroup
}

func startInjector(rng *rand.Rand, p *upstreamtest.FaultProxy, f *feed, watch *watcher) *injector {
	in := &injector{
		rng: rng, proxy: p, feed: f, watch: watch,
		counts: map[string]int{}, stop: make(chan struct{}),
	}
	in.wg.Add(1)
	go in.run()
	return in
}

// stopAndHeal ends the injector, waits for it and lifts every fault, so
// the counts are final and the network is clean.
func (in *injector) stopAndHeal() (counts map[string]int, undetected int) {
	close(in.stop)
	in.wg.Wait()
	in.heal()
	return in.counts, in.undetected
}

func (in *injector) heal() {
	in.proxy.SetLatency(0)
	in.proxy.SetSlice(0)
	in.proxy.SetBandwidth(0)
	in.proxy.Blackhole(false)
	in.proxy.RefuseNew(false)
	in.feed.refuseFor(0)
}

func (in *injector) run() {
	defer in.wg.Done()
	for in.pause(in.between(100*time.Millisecond, 400*time.Millisecond)) {
		kind := faultKinds[in.rng.IntN(len(faultKinds))]
		if in.apply(kind) {
			in.counts[kind]++
		}
		in.heal()
	}
}

// apply injects one fault and holds it for its duration; it reports
// whether the fault took place (a server close needs a live connection).
func (in *injector) apply(kind string) bool {
	switch kind {
	case faultLatency:
		in.proxy.SetLatency(in.between(20*time.Millisecond, 150*time.Millisecond))
		in.pause(in.between(300*time.Millisecond, time.Second))
	case faultBlackhole:
		in.blackhole()
	case faultReset:
		in.proxy.ResetAll()
	case faultSlice:
		in.proxy.SetSlice(1 + in.rng.IntN(16))
		in.pause(in.between(300*time.Millisecond, time.Second))
	case faultBandwidth:
		// A thin link (8–64 KiB/s): the live stream fits, a resume's replay
		// or a burst of acks queues behind it.
		in.proxy.SetBandwidth(int64(8<<10 + in.rng.IntN(56<<10)))
		in.pause(in.between(300*time.Millisecond, time.Second))
	case faultClose1001:
		return in.feed.closeLive(1001, "going away")
	case faultClose1012:
		return in.feed.closeLive(1012, "service restart")
	case faultRefuse503:
		// Refuse handshakes for a while and drop the connection, so the
		// reconnect runs into the refusals.
		d := in.between(200*time.Millisecond, 600*time.Millisecond)
		in.feed.refuseFor(d)
		in.proxy.ResetAll()
		in.pause(d)
	}
	return true
}

// blackhole holds every byte both ways, long enough for the heartbeat to
// notice: the FaultProxy delivers held bytes intact afterwards, so without
// this check a tether that never noticed would pass the ledger. A blackhole
// that starts while the upstream is not confirmed (a dial in progress has
// no heartbeat yet) is not checked.
func (in *injector) blackhole() {
	wasUp, before := in.watch.now()
	in.proxy.Blackhole(true)
	if !in.pause(in.between(blackholeMin, blackholeMin+400*time.Millisecond)) {
		return
	}
	if _, after := in.watch.now(); wasUp && after == before {
		in.undetected++
	}
}

// between is a uniformly random duration in [lo, hi).
func (in *injector) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(in.rng.Int64N(int64(hi-lo)))
}

// pause waits d; it reports false when the injector was stopped first.
func (in *injector) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-in.stop:
		return false
	}
}
