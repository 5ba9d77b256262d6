package storm

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

// TestValidate: every field that would make a run meaningless or endless is
// refused with ErrInvalidConfig, and Run refuses it too.
func TestValidate(t *testing.T) {
	good := DefaultConfig()
	sc := LossScenario(DefaultOutage)
	st := DefaultStrategies()[rowFull]
	if err := errors.Join(good.Validate(), sc.Validate(), st.Validate()); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config, *Scenario, *Strategy)
	}{
		{"no clients", func(c *Config, _ *Scenario, _ *Strategy) { c.Clients = 0 }},
		{"too many clients", func(c *Config, _ *Scenario, _ *Strategy) { c.Clients = maxClients + 1 }},
		{"no capacity", func(c *Config, _ *Scenario, _ *Strategy) { c.Capacity = 0 }},
		{"fractional Retry-After", func(c *Config, _ *Scenario, _ *Strategy) { c.RetryAfter = 1500 * time.Millisecond }},
		{"negative Retry-After", func(c *Config, _ *Scenario, _ *Strategy) { c.RetryAfter = -time.Second }},
		{"negative restart floor", func(c *Config, _ *Scenario, _ *Strategy) { c.Policy.RestartFloor = -1 }},
		{"huge try-again floor", func(c *Config, _ *Scenario, _ *Strategy) { c.Policy.TryAgainFloor = 2 * time.Hour }},
		{"no horizon", func(c *Config, _ *Scenario, _ *Strategy) { c.Horizon = 0 }},
		{"close code below 1000", func(_ *Config, s *Scenario, _ *Strategy) { s.CloseCode = 999 }},
		{"negative outage", func(_ *Config, s *Scenario, _ *Strategy) { s.Outage = -time.Second }},
		{"zero base", func(_ *Config, _ *Scenario, s *Strategy) { s.Backoff.Base = 0 }},
		{"no cap", func(_ *Config, _ *Scenario, s *Strategy) { s.Backoff.Cap = 0 }},
		{"unknown jitter", func(_ *Config, _ *Scenario, s *Strategy) { s.Backoff.Jitter = upstream.Jitter(99) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s, b := good, sc, st
			tc.edit(&c, &s, &b)
			if err := errors.Join(c.Validate(), s.Validate(), b.Validate()); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate: %v, want ErrInvalidConfig", err)
			}
			if _, err := Run(c, s, b); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Run: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestTetherDefaults compares this package's idea of tether's defaults with
// the envDefault tags of internal/config's Config, the source of truth, so that
// the "tether defaults" row cannot silently describe another configuration.
func TestTetherDefaults(t *testing.T) {
	tags := envDefaults(t, "../../internal/config/config.go")
	for _, tc := range []struct {
		env  string
		want time.Duration
	}{
		{"BACKOFF_BASE", TetherBackoffBase},
		{"BACKOFF_CAP", TetherBackoffCap},
		{"RESTART_FLOOR", TetherRestartFloor},
		{"TRY_AGAIN_FLOOR", TetherTryAgainFloor},
	} {
		got, err := time.ParseDuration(tags[tc.env])
		if err != nil || got != tc.want {
			t.Errorf("TETHER_%s defaults to %q in cmd/tether, storm assumes %v", tc.env, tags[tc.env], tc.want)
		}
	}
	if j, err := upstream.ParseJitter(tags["BACKOFF_JITTER"]); err != nil || j != TetherJitter {
		t.Errorf("TETHER_BACKOFF_JITTER defaults to %q in cmd/tether, storm assumes %v", tags["BACKOFF_JITTER"], TetherJitter)
	}
	p := TetherClosePolicy()
	permanent, errP := upstream.ParseCodeSet(upstream.DefaultPermanentCodes)
	reauth, errR := upstream.ParseCodeSet(upstream.DefaultReauthCodes)
	if errors.Join(errP, errR) != nil || p.Permanent.String() != permanent.String() || p.Reauth.String() != reauth.String() {
		t.Errorf("close policy codes %q / %q, want the upstream defaults %q / %q",
			p.Permanent, p.Reauth, upstream.DefaultPermanentCodes, upstream.DefaultReauthCodes)
	}
}

// envDefaults returns env name → envDefault of the struct fields in file.
func envDefaults(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("read tether's configuration: %v", err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		field, ok := n.(*ast.Field)
		if !ok || field.Tag == nil {
			return true
		}
		raw, err := strconv.Unquote(field.Tag.Value)
		if err != nil {
			return true
		}
		tag := reflect.StructTag(raw)
		if name, ok := tag.Lookup("env"); ok {
			out[name] = tag.Get("envDefault")
		}
		return true
	})
	return out
}

// TestServer: the admission model refuses before it is up, completes at
// most capacity handshakes per tick, and starts every tick afresh.
func TestServer(t *testing.T) {
	s := server{up: 2 * time.Second, capacity: 2}
	for _, tc := range []struct {
		at   time.Duration
		want outcome
	}{
		{0, refused},
		{2*time.Second - 1, refused},
		{2 * time.Second, accepted},
		{2500 * time.Millisecond, accepted},
		{2900 * time.Millisecond, rejected},
		{2999 * time.Millisecond, rejected},
		{3 * time.Second, accepted},
		{3 * time.Second, accepted},
		{3 * time.Second, rejected},
		{7 * time.Second, accepted},
	} {
		if got := s.dial(tc.at); got != tc.want {
			t.Errorf("dial at %v: outcome %d, want %d", tc.at, got, tc.want)
		}
	}
}

// TestRejectFloor: the server's Retry-After goes through the header grammar
// the dialer parses.
func TestRejectFloor(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, 0},
		{time.Second, time.Second},
		{90 * time.Second, 90 * time.Second},
		{2 * upstream.MaxRetryAfter, upstream.MaxRetryAfter},
	} {
		if got, err := rejectFloor(tc.in); err != nil || got != tc.want {
			t.Errorf("rejectFloor(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 50000: "50,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%d) = %q, want %q", in, got, want)
		}
	}
}
