package storm

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

// pcgStream is the second PCG seed word; fixed so that Config.Seed alone
// names a run.
const pcgStream = 0x7e7e7e7e

// Run simulates one strategy in one scenario: at t=0 every client loses its
// upstream with sc.CloseCode, then each dials when its backoff says, meets
// the server model, and either connects or fails and backs off again, until
// all are connected or cfg.Horizon passes.
//
// The run is deterministic: one math/rand/v2 PCG source seeded from
// cfg.Seed feeds every client's Backoff.Rand, in event order. Every
// (scenario, strategy) pair starts from the same seed, so rows of a table
// differ by their strategy only, not by their luck.
func Run(cfg Config, sc Scenario, st Strategy) (Result, error) {
	if err := errors.Join(cfg.Validate(), sc.Validate(), st.Validate()); err != nil {
		return Result{}, err
	}
	first, err := lossFloor(cfg.Policy, sc.CloseCode)
	if err != nil {
		return Result{}, fmt.Errorf("scenario %q: close %d: %w", sc.Name, sc.CloseCode, err)
	}
	reject, err := rejectFloor(cfg.RetryAfter)
	if err != nil {
		return Result{}, fmt.Errorf("http 503: %w", err)
	}
	b := st.Backoff
	b.Rand = rand.New(rand.NewPCG(cfg.Seed, pcgStream)).Float64
	s := sim{
		backoff: b,
		first:   first,
		reject:  reject,
		server:  server{up: sc.Outage, capacity: cfg.Capacity},
		horizon: cfg.Horizon,
		result:  Result{Scenario: sc.Name, Strategy: st.Name, TetherDefault: st.TetherDefault, Clients: cfg.Clients},
	}
	s.run()
	s.result.finish()
	return s.result, nil
}

// sim is one run in progress.
type sim struct {
	backoff upstream.Backoff
	first   time.Duration // floor of the delay after the loss
	reject  time.Duration // floor of the delay after a 503
	server  server
	horizon time.Duration
	result  Result
}

// run is the event loop. Each client has exactly one pending wake-up until
// it connects, so the queue never holds more than Clients entries and the
// earliest one is updated in place (heap.Fix) rather than popped and pushed
// again.
func (s *sim) run() {
	clients := make([]client, s.result.Clients)
	q := make(queue, len(clients))
	for i := range clients {
		// All connections end at t=0; client i computes its first delay
		// exactly as upstream.Client.wait does after the loss.
		q[i] = wake{at: clients[i].fail(s.backoff, s.first), id: int32(i)}
	}
	heap.Init(&q)
	for len(q) > 0 && q[0].at <= s.horizon {
		w := q[0]
		o := s.server.dial(w.at)
		s.result.record(w.at, o)
		if o == accepted {
			heap.Pop(&q)
			continue
		}
		q[0].at = w.at + clients[w.id].fail(s.backoff, s.floor(o))
		heap.Fix(&q, 0)
	}
}

// floor is the minimum delay after a failed dial: a refusal is a network
// error, which carries none; a 503 carries the server's Retry-After.
func (s *sim) floor(o outcome) time.Duration {
	if o == rejected {
		return s.reject
	}
	return 0
}

// RunAll runs every strategy in every scenario, scenario-major, in the order
// given.
func RunAll(cfg Config, scenarios []Scenario, strategies []Strategy) ([]Result, error) {
	out := make([]Result, 0, len(scenarios)*len(strategies))
	for _, sc := range scenarios {
		for _, st := range strategies {
			r, err := Run(cfg, sc, st)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}
