package upstream_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

// These tests show why jitter is the default. When a server restarts, every
// client loses its connection at the same instant. Without jitter they all
// compute the same delays and hit the server together on every retry, so the
// recovering server takes the whole fleet's handshakes (TLS, auth, replays)
// in one burst, may fall over again, and the cycle repeats. With full jitter
// the same clients arrive spread over the whole backoff window.

const (
	stormClients = 100
	stormBucket  = 100 * time.Millisecond
	stormSeed    = 1012
)

func stormBackoff(j upstream.Jitter, client int) upstream.Backoff {
	// One independent seeded source per client, as if each were its own
	// process: deterministic, yet not correlated with the others.
	src := rand.New(rand.NewPCG(stormSeed, uint64(client)))
	return upstream.Backoff{Jitter: j, Base: 500 * time.Millisecond, Cap: 30 * time.Second, Rand: src.Float64}
}

// maxPerBucket counts arrivals per stormBucket-wide time slot and returns the
// fullest slot's count.
func maxPerBucket(arrivals []time.Duration) int {
	counts := map[time.Duration]int{}
	most := 0
	for _, at := range arrivals {
		slot := at / stormBucket
		counts[slot]++
		most = max(most, counts[slot])
	}
	return most
}

// spreadLimit is twice the mean load per bucket when arrivals spread evenly
// over window: comfortably above what uniform draws produce, far below the
// lockstep value of stormClients.
func spreadLimit(window time.Duration) int {
	buckets := int((window + stormBucket - 1) / stormBucket)
	return 2 * stormClients / buckets
}

// TestStormFirstRetry: all clients drop at t=0 and schedule their first
// retry (attempt 0, ceiling Base).
func TestStormFirstRetry(t *testing.T) {
	arrivals := func(j upstream.Jitter) []time.Duration {
		out := make([]time.Duration, stormClients)
		for i := range out {
			out[i] = stormBackoff(j, i).Delay(0, 0)
		}
		return out
	}
	base := stormBackoff(upstream.JitterFull, 0).Base
	if got, limit := maxPerBucket(arrivals(upstream.JitterFull)), spreadLimit(base); got > limit {
		t.Errorf("full jitter: %d of %d clients in one %v slot, want ≤ %d", got, stormClients, stormBucket, limit)
	}
	if got := maxPerBucket(arrivals(upstream.JitterNone)); got != stormClients {
		t.Errorf("no jitter: fullest slot has %d clients, want all %d (lockstep)", got, stormClients)
	}
}

// TestStormRestartFloor: a server closing with 1012 gives every client the
// same floor; the jitter added on top of it must still spread them.
func TestStormRestartFloor(t *testing.T) {
	const floor = 5 * time.Second
	arrivals := func(j upstream.Jitter) []time.Duration {
		out := make([]time.Duration, stormClients)
		for i := range out {
			out[i] = stormBackoff(j, i).DelayWithFloor(0, 0, floor)
		}
		return out
	}
	full := arrivals(upstream.JitterFull)
	for i, at := range full {
		if at < floor {
			t.Fatalf("client %d retries at %v, before the %v floor", i, at, floor)
		}
	}
	base := stormBackoff(upstream.JitterFull, 0).Base
	if got, limit := maxPerBucket(full), spreadLimit(base); got > limit {
		t.Errorf("full jitter over floor: %d of %d clients in one %v slot, want ≤ %d", got, stormClients, stormBucket, limit)
	}
	if got := maxPerBucket(arrivals(upstream.JitterNone)); got != stormClients {
		t.Errorf("no jitter over floor: fullest slot has %d clients, want all %d", got, stormClients)
	}
}

// TestStormOutage runs each client's retry loop against a server that is
// down for outage: every dial before then fails and the client backs off
// again (attempt rising, prev fed back as the client does). It records the
// instant each client finally reaches the restarted server. Without jitter
// the whole fleet arrives in one slot; with full jitter no slot holds more
// than a quarter of it.
func TestStormOutage(t *testing.T) {
	const outage = 3 * time.Second
	reconnectTimes := func(j upstream.Jitter) []time.Duration {
		out := make([]time.Duration, stormClients)
		for i := range out {
			b := stormBackoff(j, i)
			var now, prev time.Duration
			for n := 0; now < outage; n++ {
				prev = b.Delay(n, prev)
				now += prev
			}
			out[i] = now
		}
		return out
	}
	if got := maxPerBucket(reconnectTimes(upstream.JitterNone)); got != stormClients {
		t.Errorf("no jitter: fullest slot has %d clients, want all %d", got, stormClients)
	}
	for _, j := range []upstream.Jitter{upstream.JitterFull, upstream.JitterEqual, upstream.JitterDecorrelated} {
		if got := maxPerBucket(reconnectTimes(j)); got > stormClients/4 {
			t.Errorf("%v jitter: %d of %d clients reconnect in one %v slot, want ≤ %d", j, got, stormClients, stormBucket, stormClients/4)
		}
	}
}
