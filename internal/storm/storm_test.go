package storm

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

// fullEnv switches TestStorm to the full configuration of the issue and the
// README (50,000 clients, 2,000 handshakes/s):
//
//	TETHER_STORM_FULL=1 go test -run TestStorm -v ./internal/storm
const fullEnv = "TETHER_STORM_FULL"

// docsJSON is the committed result of the full run (cmd/stormplot -json),
// relative to this package.
const docsJSON = "../../docs/storm.json"

// stormConfig is the short configuration by default: a tenth of the clients
// and of the capacity, so the minimum recovery time (clients / capacity =
// 25 s after the server is back) and the shape of every curve stay those of
// the full run.
func stormConfig() (Config, bool) {
	cfg := DefaultConfig()
	if os.Getenv(fullEnv) != "" {
		return cfg, true
	}
	cfg.Clients /= 10
	cfg.Capacity /= 10
	return cfg, false
}

// Rows of DefaultStrategies, checked by TestDefaultStrategies.
const (
	rowFixed = iota
	rowExponential
	rowEqual
	rowFull
	rowDecorrelated
	rowCount
)

// TestStorm runs every default strategy in both default scenarios and checks
// the properties that make the comparison meaningful, then, in the full
// configuration, that docs/storm.json still matches the code.
func TestStorm(t *testing.T) {
	cfg, full := stormConfig()
	scenarios, strategies := DefaultScenarios(), DefaultStrategies()
	results, err := RunAll(cfg, scenarios, strategies)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d clients, %d handshakes/s:\n%s", cfg.Clients, cfg.Capacity, Table(results))
	for i, r := range results {
		checkAccounting(t, cfg, scenarios[i/rowCount], r)
	}
	loss, restart := results[:rowCount], results[rowCount:]
	checkLoss(t, cfg, scenarios[0], loss)
	checkRestart(t, cfg, scenarios[1], restart)
	if full {
		checkDocs(t, results)
	}
}

// checkAccounting checks what holds for every run whatever the strategy: the
// counters add up, the server never completes more than its capacity in a
// tick nor anything while it is down, and nobody can be back before the
// capacity allows.
func checkAccounting(t *testing.T, cfg Config, sc Scenario, r Result) {
	t.Helper()
	name := r.Scenario + " / " + r.Strategy
	if !r.Recovered() {
		t.Errorf("%s: %d of %d clients connected", name, r.Connected, r.Clients)
		return
	}
	if r.Attempts != r.Refused+r.Rejected+r.Connected || r.Attempts < r.Clients {
		t.Errorf("%s: attempts %d, refused %d, rejected %d, connected %d do not add up",
			name, r.Attempts, r.Refused, r.Rejected, r.Connected)
	}
	if got := sum(r.Arrivals); got != r.Rejected+r.Connected {
		t.Errorf("%s: %d arrivals in the histogram, want rejected+connected = %d", name, got, r.Rejected+r.Connected)
	}
	if got := sum(r.Accepted); got != r.Connected {
		t.Errorf("%s: %d accepted in the histogram, want %d", name, got, r.Connected)
	}
	up := int(sc.Outage / Bucket)
	for i, n := range r.Accepted {
		if n > cfg.Capacity || (i < up && r.Arrivals[i] > 0) {
			t.Errorf("%s: second %d has %d arrivals, %d accepted; server up at %v, capacity %d",
				name, i, r.Arrivals[i], n, sc.Outage, cfg.Capacity)
		}
	}
	ticks := (cfg.Clients + cfg.Capacity - 1) / cfg.Capacity
	if least := time.Duration(up+ticks-1) * Bucket; r.Recovery < least {
		t.Errorf("%s: all connected at %v, before the %v that %d ticks of %d take", name, r.Recovery, least, ticks, cfg.Capacity)
	}
	if r.Half > r.Recovery || r.Peak != slices.Max(r.Arrivals) || r.Arrivals[r.PeakAt/Bucket] != r.Peak {
		t.Errorf("%s: half %v, recovery %v, peak %d at %v inconsistent with the histogram", name, r.Half, r.Recovery, r.Peak, r.PeakAt)
	}
}

// checkLoss: without jitter the whole population reaches the server in one
// second; with full jitter the peak is a small fraction of it and below
// equal jitter's, the comparison of the seeds' figure.
func checkLoss(t *testing.T, cfg Config, sc Scenario, rs []Result) {
	t.Helper()
	fixed, exp, equal, fullJ := rs[rowFixed], rs[rowExponential], rs[rowEqual], rs[rowFull]
	if fixed.Peak != cfg.Clients || fixed.PeakAt != sc.Outage {
		t.Errorf("fixed delay: peak %d at %v, want all %d clients at %v", fixed.Peak, fixed.PeakAt, cfg.Clients, sc.Outage)
	}
	if exp.Peak != cfg.Clients {
		t.Errorf("plain exponential: peak %d, want all %d clients in one second", exp.Peak, cfg.Clients)
	}
	if fullJ.Peak*10 > cfg.Clients {
		t.Errorf("full jitter: peak %d/s, want ≤ a tenth of the %d clients", fullJ.Peak, cfg.Clients)
	}
	if fullJ.Peak >= equal.Peak {
		t.Errorf("full jitter peak %d/s, want below equal jitter's %d/s", fullJ.Peak, equal.Peak)
	}
	for _, r := range rs[rowEqual:] {
		if r.Recovery >= exp.Recovery || r.Attempts >= fixed.Attempts {
			t.Errorf("%s: recovery %v and %d attempts, want faster than plain exponential (%v) and fewer than fixed delay (%d)",
				r.Strategy, r.Recovery, r.Attempts, exp.Recovery, fixed.Attempts)
		}
	}
}

// checkRestart: after 1012 no client dials before the restart floor (the
// default restart takes exactly the floor, so a dial before it would be
// refused), and without jitter every client arrives exactly at the floor.
func checkRestart(t *testing.T, cfg Config, sc Scenario, rs []Result) {
	t.Helper()
	floor := cfg.Policy.RestartFloor
	if sc.Outage != floor {
		t.Fatalf("restart scenario lasts %v, want the floor %v", sc.Outage, floor)
	}
	for _, r := range rs {
		if r.Refused != 0 {
			t.Errorf("%s: %d dials before the %v restart floor", r.Strategy, r.Refused, floor)
		}
	}
	for _, r := range rs[:rowEqual] {
		if r.Peak != cfg.Clients || r.PeakAt != floor {
			t.Errorf("%s: peak %d at %v, want all %d clients at the floor %v", r.Strategy, r.Peak, r.PeakAt, cfg.Clients, floor)
		}
	}
}

// checkDocs compares the committed docs/storm.json with this run, so that a
// change to the backoff code or to the model cannot leave a stale table in
// the README.
func checkDocs(t *testing.T, results []Result) {
	t.Helper()
	data, err := os.ReadFile(docsJSON)
	if errors.Is(err, os.ErrNotExist) {
		t.Logf("%s absent: nothing to compare", docsJSON)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []struct {
			Scenario string `json:"scenario"`
			Strategy string `json:"strategy"`
			Peak     int    `json:"peak_per_s"`
			Attempts int    `json:"attempts"`
			Arrivals []int  `json:"arrivals_per_s"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", docsJSON, err)
	}
	if len(doc.Results) != len(results) {
		t.Fatalf("%s has %d results, this run %d: regenerate it (README)", docsJSON, len(doc.Results), len(results))
	}
	for i, d := range doc.Results {
		r := results[i]
		if d.Scenario != r.Scenario || d.Strategy != r.Strategy || d.Peak != r.Peak ||
			d.Attempts != r.Attempts || !slices.Equal(d.Arrivals, r.Arrivals) {
			t.Errorf("%s row %d (%s / %s) differs from this run (%s / %s): regenerate docs/storm.png and .json and the README table",
				docsJSON, i, d.Scenario, d.Strategy, r.Scenario, r.Strategy)
		}
	}
}

// TestDefaultStrategies pins the rows the table and the plot rely on: one
// per jitter name, plus fixed delay, and tether's defaults marked once.
func TestDefaultStrategies(t *testing.T) {
	st := DefaultStrategies()
	if len(st) != rowCount {
		t.Fatalf("%d strategies, want %d", len(st), rowCount)
	}
	want := []struct {
		jitter    upstream.Jitter
		base, cap time.Duration
	}{
		rowFixed:        {upstream.JitterNone, time.Second, time.Second},
		rowExponential:  {upstream.JitterNone, TetherBackoffBase, TetherBackoffCap},
		rowEqual:        {upstream.JitterEqual, TetherBackoffBase, TetherBackoffCap},
		rowFull:         {upstream.JitterFull, TetherBackoffBase, TetherBackoffCap},
		rowDecorrelated: {upstream.JitterDecorrelated, TetherBackoffBase, TetherBackoffCap},
	}
	for i, w := range want {
		b := st[i].Backoff
		if b.Jitter != w.jitter || b.Base != w.base || b.Cap != w.cap || st[i].TetherDefault != (i == rowFull) {
			t.Errorf("strategy %d %q: %v %v→%v default=%v, want %v %v→%v default=%v",
				i, st[i].Name, b.Jitter, b.Base, b.Cap, st[i].TetherDefault, w.jitter, w.base, w.cap, i == rowFull)
		}
		if err := st[i].Validate(); err != nil {
			t.Errorf("strategy %q: %v", st[i].Name, err)
		}
	}
}

// shortConfig is a small population for the focused tests.
func shortConfig() Config {
	cfg := DefaultConfig()
	cfg.Clients, cfg.Capacity = 2_000, 80
	return cfg
}

// TestDeterministic: a seed names a run; another seed gives another run.
func TestDeterministic(t *testing.T) {
	cfg := shortConfig()
	sc, st := LossScenario(DefaultOutage), DefaultStrategies()[rowFull]
	a, errA := Run(cfg, sc, st)
	b, errB := Run(cfg, sc, st)
	if err := errors.Join(errA, errB); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs with seed %d differ: peaks %d and %d, attempts %d and %d", cfg.Seed, a.Peak, b.Peak, a.Attempts, b.Attempts)
	}
	cfg.Seed++
	c, err := Run(cfg, sc, st)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.Arrivals, c.Arrivals) {
		t.Errorf("seeds %d and %d give the same arrivals: the seed does not reach the backoff", cfg.Seed-1, cfg.Seed)
	}
}

// TestRetryAfter: with Retry-After on every 503 and no jitter, a rejected
// client comes back exactly Retry-After later, so the server sees one wave
// every Retry-After seconds instead of every second, and recovery takes
// that much longer.
func TestRetryAfter(t *testing.T) {
	const retryAfter = 5 * time.Second
	cfg := shortConfig()
	sc, st := LossScenario(DefaultOutage), FixedDelay(time.Second)
	waves := (cfg.Clients + cfg.Capacity - 1) / cfg.Capacity
	for _, tc := range []struct {
		retryAfter time.Duration
		every      time.Duration
	}{
		{0, time.Second},
		{retryAfter, retryAfter},
	} {
		cfg.RetryAfter = tc.retryAfter
		r, err := Run(cfg, sc, st)
		if err != nil {
			t.Fatal(err)
		}
		want := sc.Outage + time.Duration(waves-1)*tc.every
		if r.Recovery != want {
			t.Errorf("Retry-After %v: all connected at %v, want %v (%d waves every %v)", tc.retryAfter, r.Recovery, want, waves, tc.every)
		}
		for i, n := range r.Arrivals {
			at := time.Duration(i) * Bucket
			wave := at >= sc.Outage && (at-sc.Outage)%tc.every == 0 && at <= want
			if (n > 0) != wave {
				t.Errorf("Retry-After %v: %d arrivals at %v, want arrivals only every %v from %v to %v",
					tc.retryAfter, n, at, tc.every, sc.Outage, want)
			}
		}
	}
}

// TestCloseCodes: the close code that starts the storm goes through the
// sidecar's close policy: 1012 and 1013 floor the first delay, a permanent
// code means no storm at all.
func TestCloseCodes(t *testing.T) {
	cfg := shortConfig()
	st := FixedDelay(time.Second)
	for _, tc := range []struct {
		code  int
		first time.Duration // when the whole population dials first
		err   error
	}{
		{1006, time.Second, nil},
		{1001, time.Second, nil},
		{1012, TetherRestartFloor, nil},
		{1013, TetherTryAgainFloor, nil},
		{4001, time.Second, nil}, // reauth: re-read credentials, same backoff
		{1008, 0, ErrNoReconnect},
	} {
		r, err := Run(cfg, Scenario{Name: "code", CloseCode: tc.code}, st)
		if !errors.Is(err, tc.err) {
			t.Errorf("close %d: error %v, want %v", tc.code, err, tc.err)
			continue
		}
		if err == nil && (r.PeakAt != tc.first || r.Peak != cfg.Clients) {
			t.Errorf("close %d: %d clients first at %v, want all %d at %v", tc.code, r.Peak, r.PeakAt, cfg.Clients, tc.first)
		}
	}
}

// TestHorizon: a run that cannot finish in time says so instead of running
// on, and the table shows it.
func TestHorizon(t *testing.T) {
	cfg := shortConfig()
	cfg.Horizon = time.Minute
	// Plain exponential reaches its 30 s cap before the server is back, so
	// only the first wave's capacity connects within the minute.
	r, err := Run(cfg, LossScenario(DefaultOutage), DefaultStrategies()[rowExponential])
	if err != nil {
		t.Fatal(err)
	}
	if r.Recovered() || r.HalfRecovered() || r.Connected != cfg.Capacity || r.Recovery != 0 {
		t.Fatalf("connected %d of %d by %v (recovery %v), want exactly the first wave's %d",
			r.Connected, cfg.Clients, cfg.Horizon, r.Recovery, cfg.Capacity)
	}
	if row := Table([]Result{r}); !strings.Contains(row, "not all (1,920 left)") || !strings.Contains(row, "| – |") {
		t.Errorf("table row does not report the unfinished run:\n%s", row)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
