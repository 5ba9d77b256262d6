package storm

import (
	"errors"
	"fmt"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

// tether's own defaults (internal/config/config.go, docs/design.md "Variables"); a test
// checks them against the envDefault tags there so this file cannot drift.
const (
	TetherBackoffBase   = 500 * time.Millisecond // TETHER_BACKOFF_BASE
	TetherBackoffCap    = 30 * time.Second       // TETHER_BACKOFF_CAP
	TetherJitter        = upstream.JitterFull    // TETHER_BACKOFF_JITTER
	TetherRestartFloor  = 5 * time.Second        // TETHER_RESTART_FLOOR
	TetherTryAgainFloor = 15 * time.Second       // TETHER_TRY_AGAIN_FLOOR
)

// Defaults of the full simulation.
const (
	// DefaultClients is the population of the issue and of the seeds'
	// figure: 50,000 sidecars losing their upstream together.
	DefaultClients = 50_000
	// DefaultCapacity is the handshakes per second the server completes:
	// the planning figure of one node doing TLS plus authentication
	// (about 2,000/s). It makes the minimum recovery time 25 s for 50,000
	// clients, long enough for the strategies to differ.
	DefaultCapacity = 2_000
	// DefaultOutage is how long the upstream stays unreachable after a
	// plain loss: the "stop the server, restart after 30 s" population
	// test. With no outage every strategy whose first ceiling is 500 ms
	// sends the whole population in the first second, so peaks only
	// differ once backoff had time to spread the clients.
	DefaultOutage = 30 * time.Second
	// DefaultRestart is how long a server that closed with 1012 takes to
	// listen again: exactly TETHER_RESTART_FLOOR, the restart the floor is
	// sized for, so no floored client hits a closed port.
	DefaultRestart = TetherRestartFloor
	// DefaultHorizon bounds virtual time: a client not connected by then
	// is reported as not recovered instead of simulating forever.
	DefaultHorizon = 2 * time.Hour
	// DefaultSeed seeds the run's math/rand/v2 PCG source.
	DefaultSeed = 1
)

// Bucket is the width of one histogram bin and of one server tick: one
// second, the unit of "reconnects per second" in the seeds' figure.
const Bucket = time.Second

// Bounds that keep virtual time far from overflowing time.Duration and the
// histograms to a few hundred thousand bins.
const (
	maxClients = 1 << 24
	maxHorizon = 7 * 24 * time.Hour
	maxCap     = 24 * time.Hour
	maxFloor   = upstream.MaxRetryAfter
)

// Config is the population and the server they reconnect to. The zero value
// is not valid; start from DefaultConfig.
type Config struct {
	// Clients is the number of sidecars that lose their upstream at t=0.
	Clients int
	// Capacity is how many handshakes the server completes per one-second
	// tick; it rejects the rest of that tick at once with HTTP 503.
	Capacity int
	// RetryAfter, when > 0, is sent as "Retry-After: <seconds>" on every
	// 503, which the client takes as a floor for its next delay. Whole
	// seconds only: that is the header's delay-seconds grammar.
	RetryAfter time.Duration
	// Policy holds the close-code floors (TETHER_RESTART_FLOOR,
	// TETHER_TRY_AGAIN_FLOOR) and code sets, exactly as the sidecar gets it.
	Policy upstream.ClosePolicy
	// Seed seeds the one random source all clients of a run draw from.
	Seed uint64
	// Horizon is the virtual time after which the run stops.
	Horizon time.Duration
}

// DefaultConfig is the full simulation with tether's default close policy.
func DefaultConfig() Config {
	return Config{
		Clients:  DefaultClients,
		Capacity: DefaultCapacity,
		Policy:   TetherClosePolicy(),
		Seed:     DefaultSeed,
		Horizon:  DefaultHorizon,
	}
}

// TetherClosePolicy is the close policy the sidecar builds from its default
// variables (TETHER_PERMANENT_CODES, TETHER_REAUTH_CODES and the floors).
func TetherClosePolicy() upstream.ClosePolicy {
	// The default lists are constants of the upstream package and parse.
	permanent, _ := upstream.ParseCodeSet(upstream.DefaultPermanentCodes)
	reauth, _ := upstream.ParseCodeSet(upstream.DefaultReauthCodes)
	return upstream.ClosePolicy{
		Permanent:     permanent,
		Reauth:        reauth,
		RestartFloor:  TetherRestartFloor,
		TryAgainFloor: TetherTryAgainFloor,
	}
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	return errors.Join(
		check(c.Clients >= 1 && c.Clients <= maxClients, "Clients must be in 1..%d, got %d", maxClients, c.Clients),
		check(c.Capacity >= 1, "Capacity must be ≥ 1 handshake per second, got %d", c.Capacity),
		check(c.RetryAfter >= 0 && c.RetryAfter <= maxFloor && c.RetryAfter%time.Second == 0,
			"RetryAfter must be whole seconds in 0..%v, got %v", maxFloor, c.RetryAfter),
		check(c.Policy.RestartFloor >= 0 && c.Policy.RestartFloor <= maxFloor,
			"Policy.RestartFloor must be in 0..%v, got %v", maxFloor, c.Policy.RestartFloor),
		check(c.Policy.TryAgainFloor >= 0 && c.Policy.TryAgainFloor <= maxFloor,
			"Policy.TryAgainFloor must be in 0..%v, got %v", maxFloor, c.Policy.TryAgainFloor),
		check(c.Horizon > 0 && c.Horizon <= maxHorizon, "Horizon must be in (0, %v], got %v", maxHorizon, c.Horizon),
	)
}

// Scenario is how the population lost its upstream and when the server
// listens again.
type Scenario struct {
	// Name labels the scenario in tables and plots.
	Name string
	// CloseCode is what every client's connection ended with; it goes
	// through the same ClosePolicy.Classify as in the sidecar, so 1012 and
	// 1013 get their floors. 1006 stands for a loss without a close frame
	// (a dead network path), which the client also treats as floor 0.
	CloseCode int
	// Outage is how long after the loss the server refuses connections
	// (every dial fails fast, like a closed port); from then on it admits
	// Config.Capacity handshakes per second.
	Outage time.Duration
}

// LossScenario is the plain storm: the upstream disappears without a close
// frame and comes back after outage.
func LossScenario(outage time.Duration) Scenario {
	return Scenario{Name: fmt.Sprintf("1006 loss, server back after %v", outage), CloseCode: 1006, Outage: outage}
}

// RestartScenario is a server restart announced with close 1012: every
// client's first delay is floored at the policy's RestartFloor.
func RestartScenario(restart time.Duration) Scenario {
	return Scenario{Name: fmt.Sprintf("1012 restart, server back after %v", restart), CloseCode: 1012, Outage: restart}
}

// DefaultScenarios are the two scenarios of the table in docs/performance.md.
func DefaultScenarios() []Scenario {
	return []Scenario{LossScenario(DefaultOutage), RestartScenario(DefaultRestart)}
}

// Validate checks the fields that would make the run meaningless.
func (s Scenario) Validate() error {
	return errors.Join(
		check(s.CloseCode >= 1000 && s.CloseCode <= 4999, "Scenario.CloseCode must be in 1000..4999, got %d", s.CloseCode),
		check(s.Outage >= 0, "Scenario.Outage must be ≥ 0, got %v", s.Outage),
	)
}

// Strategy is one backoff configuration: a name and the real
// upstream.Backoff value the sidecar would use. Backoff.Rand is ignored;
// Run injects its seeded source.
type Strategy struct {
	Name    string
	Backoff upstream.Backoff
	// TetherDefault marks the row that is tether's out-of-the-box setting.
	TetherDefault bool
}

// FixedDelay is the "none (fixed delay)" row: JitterNone with Base equal to
// Cap, so every ceiling min(Cap, Base·2^n) is d.
func FixedDelay(d time.Duration) Strategy {
	return Strategy{
		Name:    fmt.Sprintf("none, fixed %v", d),
		Backoff: upstream.Backoff{Jitter: upstream.JitterNone, Base: d, Cap: d},
	}
}

// DefaultStrategies are the rows the issue asks for. upstream's JitterNone
// already is plain exponential backoff (it waits exactly the ceiling
// min(Cap, Base·2^n)); the fixed-delay row is JitterNone with Base = Cap =
// 1 s. The jittered rows use tether's default base and cap, and full jitter
// is tether's default.
func DefaultStrategies() []Strategy {
	tether := func(j upstream.Jitter) upstream.Backoff {
		return upstream.Backoff{Jitter: j, Base: TetherBackoffBase, Cap: TetherBackoffCap}
	}
	return []Strategy{
		FixedDelay(time.Second),
		{Name: "none, exponential 0.5s→30s", Backoff: tether(upstream.JitterNone)},
		{Name: "equal 0.5s→30s", Backoff: tether(upstream.JitterEqual)},
		{Name: "full 0.5s→30s (tether defaults)", Backoff: tether(TetherJitter), TetherDefault: true},
		{Name: "decorrelated 0.5s→30s", Backoff: tether(upstream.JitterDecorrelated)},
	}
}

// Validate rejects backoffs the simulation cannot run: a zero base makes
// every delay zero, so a rejected client would retry at the same virtual
// instant forever, and an unbounded cap could overflow virtual time.
func (s Strategy) Validate() error {
	b := s.Backoff
	return errors.Join(
		check(b.Base > 0, "Strategy %q: Backoff.Base must be > 0, got %v", s.Name, b.Base),
		check(b.Cap > 0 && b.Cap <= maxCap, "Strategy %q: Backoff.Cap must be in (0, %v], got %v", s.Name, maxCap, b.Cap),
		check(b.Jitter.String() == jitterName(b.Jitter), "Strategy %q: unknown jitter %v", s.Name, b.Jitter),
	)
}

// jitterName round-trips a Jitter through ParseJitter: only the values the
// sidecar can be configured with come back unchanged.
func jitterName(j upstream.Jitter) string {
	parsed, err := upstream.ParseJitter(j.String())
	if err != nil || parsed != j {
		return ""
	}
	return j.String()
}

// check returns nil when ok, else the formatted reason wrapped in
// ErrInvalidConfig.
func check(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
