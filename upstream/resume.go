package upstream

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Resumes tells Clients that the machine has just woken from sleep, so
// that each probes its connection at once (Options.Resume).
//
// Why: a laptop that sleeps comes back with connections that died while
// it slept (the server gave up on them, a NAT forgot them, the network is
// another one) but whose sockets look fine until something is written.
// Timers run on the monotonic clock, which on Linux and macOS stops during
// sleep, so a heartbeat due 10 s after the suspend fires 10 s after the
// resume, and only then starts its PingTimeout: up to PingInterval +
// PingTimeout measured from the resume, and never, with the heartbeat off,
// until TCP gives up. A Client told of the resume probes at once, so a dead
// connection is found within PingTimeout of it.
//
// Concurrency: Notify and C are safe for concurrent use; a nil *Resumes is
// valid and never fires.
type Resumes struct {
	mu sync.Mutex
	// next ends at the next Notify, then is replaced: a context rather
	// than a channel, so that each Client's connection has a callback run
	// (afterNext) instead of a goroutine waiting.
	next   context.Context
	notify context.CancelFunc
}

// NewResumes returns a Resumes that has not fired.
func NewResumes() *Resumes {
	r := &Resumes{}
	r.next, r.notify = context.WithCancel(context.Background())
	return r
}

// C is closed at the next Notify; take it again after it fired.
func (r *Resumes) C() <-chan struct{} {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next.Done()
}

// afterNext calls f in a goroutine of its own at the next Notify, unless
// stop is called first.
func (r *Resumes) afterNext(f func()) (stop func() bool) {
	if r == nil {
		return neverStarted
	}
	r.mu.Lock()
	next := r.next
	r.mu.Unlock()
	return context.AfterFunc(next, f)
}

func neverStarted() bool { return false }

// Notify wakes every Client waiting on C.
func (r *Resumes) Notify() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notify()
	r.next, r.notify = context.WithCancel(context.Background())
}

// Clock is what Watch reads: the wall clock (without its monotonic
// reading) and the monotonic clock, and a ticker. Tests inject one.
type Clock interface {
	// Now returns the wall time and the monotonic time, read together.
	Now() (wall time.Time, mono time.Duration)
	// Tick returns a channel that delivers every d, and its stop.
	Tick(d time.Duration) (<-chan time.Time, func())
}

// Defaults of WatchOptions.
const (
	// DefaultResumeTick is how often Watch compares the clocks: the delay
	// a resume adds to PingTimeout at most.
	DefaultResumeTick = time.Second
	// DefaultResumeJump is how far the wall clock must run ahead of the
	// monotonic clock over one tick to count as a sleep: larger than any
	// NTP slew, smaller than any sleep worth acting on.
	DefaultResumeJump = 3 * time.Second
)

// WatchOptions configures Watch. Zero values take the defaults.
type WatchOptions struct {
	Clock  Clock         // nil: the system clocks
	Tick   time.Duration // DefaultResumeTick
	Jump   time.Duration // DefaultResumeJump
	Logger *zap.Logger   // nil: no log
}

// Watch compares the wall clock with the monotonic one every Tick until
// ctx ends, and calls Notify when the wall clock ran ahead by more than
// Jump: the time the machine slept, which the monotonic clock did not
// count. A wall clock set back, or forward by less than Jump, is not a
// resume. Where the monotonic clock counts sleep too (Windows), timers
// are simply overdue after a resume, and the heartbeat handles them as it
// handles a process that was stopped.
func (r *Resumes) Watch(ctx context.Context, opts WatchOptions) {
	clock := opts.Clock
	if clock == nil {
		clock = systemClock{}
	}
	tick, jump := opts.Tick, opts.Jump
	if tick <= 0 {
		tick = DefaultResumeTick
	}
	if jump <= 0 {
		jump = DefaultResumeJump
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	ticks, stop := clock.Tick(tick)
	defer stop()
	prevWall, prevMono := clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		wall, mono := clock.Now()
		slept := wall.Sub(prevWall) - (mono - prevMono)
		prevWall, prevMono = wall, mono
		if slept > jump {
			log.Info("resumed from sleep, probing upstream connections", zap.Duration("slept", slept))
			r.Notify()
		}
	}
}

// systemClock is the process's clocks.
type systemClock struct{}

// monoStart anchors the monotonic readings.
var monoStart = time.Now()

func (systemClock) Now() (time.Time, time.Duration) {
	now := time.Now()
	return now.Round(0), now.Sub(monoStart) // Round(0) strips the monotonic reading
}

func (systemClock) Tick(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}
