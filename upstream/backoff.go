package upstream

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Jitter selects how a backoff delay is randomised. Jitter exists because
// clients dropped by the same event (a server restart, a load balancer
// failover) otherwise all come back at the same instants and knock the
// recovering server over again; see storm_test.go.
type Jitter int

const (
	// JitterFull waits uniform[0, c): the most spread, the default.
	JitterFull Jitter = iota
	// JitterEqual waits c/2 + uniform[0, c/2): never less than half the
	// ceiling, for servers that must not see very early retries.
	JitterEqual
	// JitterDecorrelated grows from the previous delay rather than the
	// attempt count (the AWS Architecture Blog "Exponential Backoff And
	// Jitter" formula).
	JitterDecorrelated
	// JitterNone waits exactly the ceiling. Deterministic, for tests only:
	// in production it recreates lockstep reconnect storms.
	JitterNone
)

var jitterNames = [...]string{
	JitterFull:         "full",
	JitterEqual:        "equal",
	JitterDecorrelated: "decorrelated",
	JitterNone:         "none",
}

// String returns the name accepted by ParseJitter.
func (j Jitter) String() string {
	if j >= 0 && int(j) < len(jitterNames) {
		return jitterNames[j]
	}
	return "Jitter(" + strconv.Itoa(int(j)) + ")"
}

// ParseJitter parses a jitter name as written in TETHER_BACKOFF_JITTER.
// Case and surrounding spaces are ignored; the error lists the valid names so
// the operator can fix the variable without reading the docs.
func ParseJitter(s string) (Jitter, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for j, n := range jitterNames {
		if n == name {
			return Jitter(j), nil
		}
	}
	return 0, fmt.Errorf("unknown jitter %q: want one of %s", s, strings.Join(jitterNames[:], ", "))
}

// UnmarshalText lets configuration decoders (caarlos0/env) parse a Jitter.
func (j *Jitter) UnmarshalText(b []byte) error {
	v, err := ParseJitter(string(b))
	if err != nil {
		return err
	}
	*j = v
	return nil
}

// Backoff computes reconnect delays. It is a plain value: no state, no clock.
// The caller keeps the attempt counter and the previous delay, so the one
// place that resets the counter (on confirmation) stays in the state machine.
//
// Delay and DelayWithFloor are safe for concurrent use when Rand is; the
// default (math/rand/v2's global source) is.
type Backoff struct {
	Jitter Jitter
	// Base is the ceiling of the first retry. Base ≤ 0 yields zero delays.
	Base time.Duration
	// Cap bounds every ceiling. Cap ≤ 0 means no cap other than the largest
	// time.Duration; configuration validation is expected to prevent that.
	Cap time.Duration
	// Rand returns a uniform number in [0,1). nil uses math/rand/v2.Float64.
	// Tests inject fixed values or a seeded source.
	Rand func() float64
}

// Delay returns the wait before the next dial.
//
// n is the number of failures since the connection was last confirmed,
// counting the one that just happened from zero: the first retry passes 0 and
// has the ceiling Base, the next 1 and the ceiling 2·Base, and so on, each
// ceiling c = min(Cap, Base·2^n). Negative n is treated as 0. prev is the
// delay returned last time (0 for the first retry); only decorrelated uses it.
//
//	full:         uniform[0, c)
//	equal:        c/2 + uniform[0, c/2)
//	decorrelated: min(Cap, uniform[Base, 3·max(prev, Base)))
//	none:         c
//
// Decorrelated treats prev < Base as Base, as the AWS formula initialises
// sleep = base: otherwise the first retry would be exactly Base for every
// client, which is the lockstep that jitter exists to prevent.
//
// The computation never overflows: the doubling stops at Cap, so n may be
// arbitrarily large.
func (b Backoff) Delay(n int, prev time.Duration) time.Duration {
	switch b.Jitter {
	case JitterEqual:
		c := b.ceiling(n)
		half := c / 2
		return half + scale(b.draw(), c-half)
	case JitterDecorrelated:
		return b.decorrelated(prev)
	case JitterNone:
		return b.ceiling(n)
	default:
		return scale(b.draw(), b.ceiling(n))
	}
}

// DelayWithFloor returns the wait when the server imposed a minimum: close
// code 1012 (service restart) → TETHER_RESTART_FLOOR, 1013 (try again later)
// → TETHER_TRY_AGAIN_FLOOR, or an HTTP Retry-After.
//
// floor ≤ 0 is the same as Delay(n, prev). Otherwise the result is
// floor + uniform[0, Cap) for every jittered mode (exactly floor with
// JitterNone). The floor is never undercut. The jitter window on top of it
// is the whole Cap, not the attempt's ceiling, because a floor is a message
// the server sent to every client at the same moment: with the first
// attempt's ceiling (Base) a fleet closed with 1012 would return within
// Base of the floor, all together, and the simulation in internal/storm
// measured 92,765 handshakes in that second for 50,000 clients and a server
// completing 2,000/s, against 1,786/s and no rejected handshake with the
// Cap-wide window (docs/performance.md "Reconnect storms"). The result may exceed Cap:
// Cap limits our own guessing, while a floor is the server's explicit
// request and wins. With Cap ≤ 0 the window is the attempt's ceiling.
func (b Backoff) DelayWithFloor(n int, prev, floor time.Duration) time.Duration {
	if floor <= 0 {
		return b.Delay(n, prev)
	}
	if b.Jitter == JitterNone {
		return floor
	}
	window := b.Cap
	if window <= 0 {
		window = b.ceiling(n)
	}
	return addSat(floor, scale(b.draw(), window))
}

// ceiling returns min(Cap, Base·2^n) by doubling, stopping as soon as the cap
// is reached so that neither the loop length nor the value depends on how
// large n is beyond 63.
func (b Backoff) ceiling(n int) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	limit := b.limit()
	c := b.Base
	for i := 0; i < n; i++ {
		if c >= limit-c { // 2c ≥ limit, written so it cannot overflow
			return limit
		}
		c *= 2
	}
	return min(c, limit)
}

// decorrelated implements min(Cap, uniform[Base, 3·max(prev, Base))).
func (b Backoff) decorrelated(prev time.Duration) time.Duration {
	lo := max(b.Base, 0)
	hi := mulSat(max(prev, lo), 3)
	return min(b.limit(), lo+scale(b.draw(), hi-lo))
}

// limit is the effective cap.
func (b Backoff) limit() time.Duration {
	if b.Cap <= 0 {
		return math.MaxInt64
	}
	return b.Cap
}

func (b Backoff) draw() float64 {
	if b.Rand == nil {
		return rand.Float64()
	}
	return b.Rand()
}

// scale returns r·d in [0, d) (0 when d ≤ 0). r is clamped to [0,1) so that a
// misbehaving injected source cannot push a delay out of its bounds or make
// it negative. For r < 1 the product stays below d even though float64(d)
// is rounded to 53 bits (the next float below float64(d) is already below
// d), so the conversion back to an integer is always in range; the final min
// only restates that bound.
func scale(r float64, d time.Duration) time.Duration {
	if d <= 0 || !(r > 0) { // also catches NaN
		return 0
	}
	if r >= 1 {
		return d - 1
	}
	return min(time.Duration(r*float64(d)), d-1)
}

// addSat returns a+b for non-negative a and b, saturating at the largest
// Duration.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulSat returns d·k for non-negative d and positive k, saturating.
func mulSat(d time.Duration, k int64) time.Duration {
	if d > time.Duration(math.MaxInt64/k) {
		return math.MaxInt64
	}
	return d * time.Duration(k)
}
