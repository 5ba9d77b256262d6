package upstream_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

const maxDuration = time.Duration(math.MaxInt64)

// fixedRand returns an injectable source that always yields r.
func fixedRand(r float64) func() float64 { return func() float64 { return r } }

// refCeiling is an independent reference for min(cap, base·2^n), computed
// with arbitrary precision so it cannot share an overflow bug with the code.
func refCeiling(base, limit time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	if limit <= 0 {
		limit = maxDuration
	}
	v := new(big.Int).Lsh(big.NewInt(int64(base)), uint(max(n, 0)))
	if v.Cmp(big.NewInt(int64(limit))) > 0 {
		return limit
	}
	return time.Duration(v.Int64())
}

// belowOne is the largest float64 below 1, where r·c rounds up to c for
// large c unless the code clamps it.
var belowOne = math.Nextafter(1, 0)

var boundRands = []float64{0, 0.5, 0.999999, belowOne}

// boundConfigs cover the defaults, a tiny base that needs 60+ doublings to
// reach a cap at the top of the int64 range, and no cap at all.
var boundConfigs = []struct {
	name      string
	base, cap time.Duration
}{
	{"defaults", 500 * time.Millisecond, 30 * time.Second},
	{"max-cap", 3, maxDuration},
	{"uncapped", 1, 0},
	{"base-above-cap", time.Minute, time.Second},
}

func TestJitterParse(t *testing.T) {
	tests := []struct {
		in      string
		want    upstream.Jitter
		wantErr string
	}{
		{in: "full", want: upstream.JitterFull},
		{in: "equal", want: upstream.JitterEqual},
		{in: "decorrelated", want: upstream.JitterDecorrelated},
		{in: "none", want: upstream.JitterNone},
		{in: " Full\n", want: upstream.JitterFull},
		{in: "fast", wantErr: `unknown jitter "fast": want one of full, equal, decorrelated, none`},
		{in: "", wantErr: `unknown jitter "": want one of full, equal, decorrelated, none`},
	}
	for _, tt := range tests {
		got, err := upstream.ParseJitter(tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("ParseJitter(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseJitter(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestJitterStringRoundTrip(t *testing.T) {
	for _, j := range []upstream.Jitter{upstream.JitterFull, upstream.JitterEqual, upstream.JitterDecorrelated, upstream.JitterNone} {
		var got upstream.Jitter = -1
		if err := got.UnmarshalText([]byte(j.String())); err != nil || got != j {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", j.String(), got, err, j)
		}
	}
	if s := upstream.Jitter(9).String(); s != "Jitter(9)" {
		t.Errorf("Jitter(9).String() = %q", s)
	}
}

func TestJitterUnmarshalTextErrorKeepsValue(t *testing.T) {
	j := upstream.JitterEqual
	if err := j.UnmarshalText([]byte("bogus")); err == nil {
		t.Fatal("UnmarshalText(bogus) succeeded")
	}
	if j != upstream.JitterEqual {
		t.Errorf("failed UnmarshalText changed the value to %v", j)
	}
}

func TestDelayNoneIsCeiling(t *testing.T) {
	def := upstream.Backoff{Jitter: upstream.JitterNone, Base: 500 * time.Millisecond, Cap: 30 * time.Second}
	tests := []struct {
		b    upstream.Backoff
		n    int
		want time.Duration
	}{
		{def, -1, 500 * time.Millisecond},
		{def, 0, 500 * time.Millisecond},
		{def, 1, time.Second},
		{def, 2, 2 * time.Second},
		{def, 5, 16 * time.Second},
		{def, 6, 30 * time.Second},
		{def, 62, 30 * time.Second},
		{def, 63, 30 * time.Second},
		{def, 64, 30 * time.Second},
		{def, math.MaxInt, 30 * time.Second},
		{upstream.Backoff{Jitter: upstream.JitterNone, Base: 1}, 62, 1 << 62},
		{upstream.Backoff{Jitter: upstream.JitterNone, Base: 1}, 63, maxDuration},
		{upstream.Backoff{Jitter: upstream.JitterNone, Base: 1}, math.MaxInt, maxDuration},
		{upstream.Backoff{Jitter: upstream.JitterNone, Base: 3, Cap: maxDuration}, 70, maxDuration},
		{upstream.Backoff{Jitter: upstream.JitterNone, Base: time.Minute, Cap: time.Second}, 0, time.Second},
		{upstream.Backoff{Jitter: upstream.JitterNone, Cap: time.Second}, 5, 0},
		{upstream.Backoff{Jitter: upstream.JitterNone, Base: -time.Second, Cap: time.Second}, 5, 0},
	}
	for _, tt := range tests {
		if got := tt.b.Delay(tt.n, 0); got != tt.want {
			t.Errorf("%+v Delay(%d) = %v, want %v", tt.b, tt.n, got, tt.want)
		}
	}
}

func TestDelayExactValues(t *testing.T) {
	const ms = time.Millisecond
	b := func(j upstream.Jitter, r float64) upstream.Backoff {
		return upstream.Backoff{Jitter: j, Base: 500 * ms, Cap: 30 * time.Second, Rand: fixedRand(r)}
	}
	tests := []struct {
		name string
		b    upstream.Backoff
		n    int
		prev time.Duration
		want time.Duration
	}{
		{"full r=0", b(upstream.JitterFull, 0), 0, 0, 0},
		{"full r=.5 n=0", b(upstream.JitterFull, 0.5), 0, 0, 250 * ms},
		{"full r=.5 n=3", b(upstream.JitterFull, 0.5), 3, 0, 2 * time.Second},
		{"full r=.5 capped", b(upstream.JitterFull, 0.5), 10, 0, 15 * time.Second},
		{"full r=.999999", b(upstream.JitterFull, 0.999999), 0, 0, 499999500 * time.Nanosecond},
		{"equal r=0", b(upstream.JitterEqual, 0), 0, 0, 250 * ms},
		{"equal r=.5", b(upstream.JitterEqual, 0.5), 0, 0, 375 * ms},
		{"equal r=.5 capped", b(upstream.JitterEqual, 0.5), 10, 0, 22500 * ms},
		{"decorrelated first r=0", b(upstream.JitterDecorrelated, 0), 0, 0, 500 * ms},
		{"decorrelated first r=.5", b(upstream.JitterDecorrelated, 0.5), 0, 0, time.Second},
		{"decorrelated first r=.999999", b(upstream.JitterDecorrelated, 0.999999), 0, 0, 1499999 * time.Microsecond},
		{"decorrelated prev=4s", b(upstream.JitterDecorrelated, 0.5), 7, 4 * time.Second, 6250 * ms},
		{"decorrelated capped", b(upstream.JitterDecorrelated, 0.5), 7, 20 * time.Second, 30 * time.Second},
		{"decorrelated prev<base", b(upstream.JitterDecorrelated, 0.5), 1, 100 * ms, time.Second},
		{"decorrelated prev=max", b(upstream.JitterDecorrelated, 0), 1, maxDuration, 500 * ms},
		{"decorrelated prev=max r=.5", b(upstream.JitterDecorrelated, 0.5), 1, maxDuration, 30 * time.Second},
	}
	for _, tt := range tests {
		if got := tt.b.Delay(tt.n, tt.prev); got != tt.want {
			t.Errorf("%s: Delay(%d, %v) = %v, want %v", tt.name, tt.n, tt.prev, got, tt.want)
		}
	}
}

func TestDelayFullAndEqualBounds(t *testing.T) {
	for _, cfg := range boundConfigs {
		for _, r := range boundRands {
			for n := 0; n <= 70; n++ {
				c := refCeiling(cfg.base, cfg.cap, n)
				full := upstream.Backoff{Jitter: upstream.JitterFull, Base: cfg.base, Cap: cfg.cap, Rand: fixedRand(r)}
				if d := full.Delay(n, 0); d < 0 || d >= c {
					t.Errorf("%s full r=%v n=%d: %v not in [0, %v)", cfg.name, r, n, d, c)
				}
				equal := full
				equal.Jitter = upstream.JitterEqual
				if d := equal.Delay(n, 0); d < c/2 || d >= c {
					t.Errorf("%s equal r=%v n=%d: %v not in [%v, %v)", cfg.name, r, n, d, c/2, c)
				}
			}
		}
	}
}

// TestDelayDecorrelatedBounds walks 70 consecutive retries feeding each delay
// back as prev, as the client does, and checks every step stays in
// [Base, Cap] and below 3·max(prev, Base).
func TestDelayDecorrelatedBounds(t *testing.T) {
	for _, cfg := range boundConfigs {
		if cfg.cap <= 0 || cfg.base > cfg.cap {
			continue
		}
		for _, r := range boundRands {
			b := upstream.Backoff{Jitter: upstream.JitterDecorrelated, Base: cfg.base, Cap: cfg.cap, Rand: fixedRand(r)}
			var prev time.Duration
			for n := 0; n <= 70; n++ {
				d := b.Delay(n, prev)
				if d < cfg.base || d > cfg.cap {
					t.Fatalf("%s r=%v n=%d prev=%v: %v not in [%v, %v]", cfg.name, r, n, prev, d, cfg.base, cfg.cap)
				}
				if hi := 3 * max(prev, cfg.base); hi > 0 && prev < maxDuration/3 && d >= hi {
					t.Fatalf("%s r=%v n=%d: %v not below 3·max(prev=%v, base)", cfg.name, r, n, d, prev)
				}
				prev = d
			}
		}
	}
}

func TestDelayDecorrelatedBaseAboveCap(t *testing.T) {
	b := upstream.Backoff{Jitter: upstream.JitterDecorrelated, Base: time.Minute, Cap: time.Second, Rand: fixedRand(0.5)}
	if d := b.Delay(0, 0); d != time.Second {
		t.Errorf("Delay = %v, want the cap %v", d, time.Second)
	}
}

// TestDelayMisbehavingRand: an injected source outside [0,1) must not push a
// delay out of its bounds or produce a negative duration.
func TestDelayMisbehavingRand(t *testing.T) {
	base, limit := 500*time.Millisecond, 30*time.Second
	for _, r := range []float64{1, 1.5, -0.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
		for n := 0; n <= 70; n += 7 {
			c := refCeiling(base, limit, n)
			full := upstream.Backoff{Jitter: upstream.JitterFull, Base: base, Cap: limit, Rand: fixedRand(r)}
			if d := full.Delay(n, 0); d < 0 || d >= c {
				t.Errorf("full r=%v n=%d: %v not in [0, %v)", r, n, d, c)
			}
			dec := full
			dec.Jitter = upstream.JitterDecorrelated
			if d := dec.Delay(n, time.Second); d < base || d > limit {
				t.Errorf("decorrelated r=%v n=%d: %v not in [%v, %v]", r, n, d, base, limit)
			}
			fl := full.DelayWithFloor(n, 0, 5*time.Second)
			if fl < 5*time.Second || fl >= 5*time.Second+limit {
				t.Errorf("floor r=%v n=%d: %v not in [5s, 5s+%v)", r, n, fl, limit)
			}
		}
	}
}

func TestDelayWithFloor(t *testing.T) {
	const floor = 5 * time.Second
	for _, cfg := range boundConfigs {
		for _, j := range []upstream.Jitter{upstream.JitterFull, upstream.JitterEqual, upstream.JitterDecorrelated} {
			for _, r := range boundRands {
				b := upstream.Backoff{Jitter: j, Base: cfg.base, Cap: cfg.cap, Rand: fixedRand(r)}
				for n := 0; n <= 70; n++ {
					w := cfg.cap // the window above a floor is the whole cap
					if w <= 0 {
						w = refCeiling(cfg.base, cfg.cap, n)
					}
					d := b.DelayWithFloor(n, time.Second, floor)
					hi := floor + w // may overflow for max-cap; check saturation separately
					if d < floor || (hi > floor && d >= hi) {
						t.Errorf("%s %v r=%v n=%d: %v not in [%v, %v+%v)", cfg.name, j, r, n, d, floor, floor, w)
					}
				}
			}
		}
	}
}

func TestDelayWithFloorCases(t *testing.T) {
	def := func(j upstream.Jitter, r float64) upstream.Backoff {
		return upstream.Backoff{Jitter: j, Base: 500 * time.Millisecond, Cap: 30 * time.Second, Rand: fixedRand(r)}
	}
	tests := []struct {
		name  string
		b     upstream.Backoff
		n     int
		floor time.Duration
		want  time.Duration
	}{
		{"no floor is Delay", def(upstream.JitterFull, 0.5), 3, 0, 2 * time.Second},
		{"negative floor is Delay", def(upstream.JitterFull, 0.5), 3, -time.Second, 2 * time.Second},
		{"floor plus jitter over the cap", def(upstream.JitterFull, 0.5), 0, 5 * time.Second, 20 * time.Second},
		{"equal jitter over the cap too", def(upstream.JitterEqual, 0.25), 0, 5 * time.Second, 12500 * time.Millisecond},
		{"floor plus zero jitter", def(upstream.JitterFull, 0), 0, 5 * time.Second, 5 * time.Second},
		{"floor exceeds cap", def(upstream.JitterFull, 0.5), 10, time.Minute, time.Minute + 15*time.Second},
		{"none is exactly floor", def(upstream.JitterNone, 0.5), 4, 15 * time.Second, 15 * time.Second},
		{"saturates", def(upstream.JitterFull, 0.5), 3, maxDuration - 1, maxDuration},
	}
	for _, tt := range tests {
		if got := tt.b.DelayWithFloor(tt.n, 0, tt.floor); got != tt.want {
			t.Errorf("%s: DelayWithFloor(%d, 0, %v) = %v, want %v", tt.name, tt.n, tt.floor, got, tt.want)
		}
	}
}

// TestDelayMeans checks the distributions, not just their bounds: with a
// seeded source the sample means must sit at their expected fraction of the
// ceiling. The tolerance (2% of c) is about seven standard errors for 20000
// uniform samples, and the seed makes the test deterministic anyway.
func TestDelayMeans(t *testing.T) {
	const samples = 20000
	tests := []struct {
		jitter upstream.Jitter
		n      int
		want   float64 // expected mean as a fraction of the ceiling
	}{
		{upstream.JitterFull, 0, 0.5},
		{upstream.JitterFull, 4, 0.5},
		{upstream.JitterFull, 40, 0.5},
		{upstream.JitterEqual, 0, 0.75},
		{upstream.JitterEqual, 40, 0.75},
	}
	for _, tt := range tests {
		src := rand.New(rand.NewPCG(1, uint64(tt.n)))
		b := upstream.Backoff{Jitter: tt.jitter, Base: 500 * time.Millisecond, Cap: 30 * time.Second, Rand: src.Float64}
		c := float64(refCeiling(b.Base, b.Cap, tt.n))
		var sum float64
		for range samples {
			sum += float64(b.Delay(tt.n, 0))
		}
		if mean := sum / samples / c; math.Abs(mean-tt.want) > 0.02 {
			t.Errorf("%v n=%d: mean %.4f·c, want %.2f·c ± 0.02", tt.jitter, tt.n, mean, tt.want)
		}
	}
}

// TestDelayDefaultRand: a nil Rand falls back to the global source, which is
// still bounded and actually random.
func TestDelayDefaultRand(t *testing.T) {
	b := upstream.Backoff{Jitter: upstream.JitterFull, Base: 500 * time.Millisecond, Cap: 30 * time.Second}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := b.Delay(0, 0)
		if d < 0 || d >= b.Base {
			t.Fatalf("Delay = %v, not in [0, %v)", d, b.Base)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Errorf("1000 draws from the default source gave %d distinct delays", len(seen))
	}
}
