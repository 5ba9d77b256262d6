package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// summaryEvery spaces the app's periodic summaries.
const summaryEvery = 5 * time.Second

// Run plays the demo until ctx ends or the app has the events of
// opts.Duration: it starts the feed, tether in front of it (through
// opts.Tether) and the naive app, injects faults, and narrates to opts.Out. On the way out it stops the
// faults, closes the app's connection, stops tether, closes the feed and
// prints a summary; every goroutine has ended when it returns.
//
// It returns nil after a normal end (Ctrl-C included), an error wrapping
// ErrInvalidOptions for bad options, ErrClientClosed when the client's
// socket was closed under it (ErrStreamEnded when the SSE app's stream
// ended), ErrTetherStopped when tether quit early.
func Run(ctx context.Context, opts Options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	m := webSocketMode()
	if opts.SSE {
		m = sseMode()
	}
	d := &demo{opts: opts, mode: m, narr: newNarrator(opts.Out, time.Now, demoSettings, opts.Verbose, m.words)}
	return d.run(ctx)
}

// demo is one run's parts, in start order.
type demo struct {
	opts   Options
	mode   mode
	narr   *narrator
	feed   feed
	tether *tetherProc
	app    app
	faults *faults
}

func (d *demo) run(ctx context.Context) error {
	d.narr.header(d.opts)
	feed, env, err := d.mode.start(feedOptions{
		rate: d.opts.Rate,
		rng:  rand.New(rand.NewPCG(d.opts.Seed, 0x9e1d)),
		now:  time.Now,
		narr: d.narr,
	})
	if err != nil {
		return err
	}
	d.feed = feed
	defer feed.Close()
	d.tether = startTether(ctx, d.opts.Tether, env, d.narr.logger())
	if err := d.connect(ctx); err != nil || d.app == nil {
		serr := d.tether.shutdown()
		if serr != nil && errors.Is(err, serr) {
			serr = nil // tether's own start-up failure, already in err
		}
		return errors.Join(err, serr)
	}
	d.faults = startFaults(faultsConfig{
		feed:       feed,
		app:        d.app,
		repertoire: d.mode.repertoire,
		plan:       newPlan(d.opts.Seed, d.opts.FaultEvery, len(d.mode.repertoire)),
		rate:       d.opts.Rate,
		last:       d.lastEvent(),
		narr:       d.narr,
	})
	return d.stop(d.watch(ctx))
}

// connect waits for tether and connects the app. It leaves d.app nil when
// ctx ended first.
func (d *demo) connect(ctx context.Context) error {
	addr, err := d.tether.listening(ctx)
	if err != nil || addr == nil {
		return err
	}
	app, err := d.mode.dial(ctx, addr, d.opts.Rate, d.narr)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	d.app = app
	return nil
}

// lastEvent is the event the demo ends at, the last of opts.Duration; 0
// when it runs until ctx ends.
func (d *demo) lastEvent() int64 {
	if d.opts.Duration <= 0 {
		return 0
	}
	return eventsIn(d.opts.Duration, d.opts.Rate)
}

// watch prints the app's periodic summary until the demo should end: ctx
// ends, tether stops, the app is gone or, with a duration, the app has its
// events and has seen every fault repaired. It returns why, for the closing
// line.
//
// The duration is counted in the app's events, as the fault schedule is:
// on a loaded machine a wall-clock end could come before the first fault,
// or cut a repair short.
func (d *demo) watch(ctx context.Context) string {
	var end <-chan struct{}
	if d.lastEvent() > 0 {
		end = d.faults.finished() // no fault falls before the last event any more
	}
	tick := time.NewTicker(summaryEvery)
	defer tick.Stop()
	for repaired := false; ; {
		select {
		case <-ctx.Done():
			return "interrupted"
		case <-end:
			if repaired {
				return fmt.Sprintf("%s has the feed's first %s of events and saw every fault repaired",
					d.mode.appName(), fmtSetting(d.opts.Duration))
			}
			end, repaired = d.app.reached(max(d.lastEvent(), d.faults.repairedBy())), true
		case <-d.tether.done:
			return "tether stopped"
		case <-d.app.Done():
			return d.mode.gone
		case <-tick.C:
			d.narr.say(d.mode.app, "%s", appLine(d.app.Stats(), d.mode.words))
		}
	}
}

// stop shuts the demo down in the order that keeps the app's connection
// honest: faults off, the app leaves (so tether's drain has no app to
// close), tether stops, the feed closes. Then the summary.
func (d *demo) stop(why string) error {
	d.narr.say(srcDemo, "%s: stopping the faults; %s", why, d.mode.stopping)
	counts := d.faults.stop()
	d.app.Close()
	terr := tetherError(why, d.tether.shutdown())
	d.feed.Close()
	st := d.app.Stats()
	d.narr.summary(report{
		elapsed:   d.narr.elapsedAt(d.narr.now()),
		seed:      d.opts.Seed,
		faults:    countsLine(d.mode.repertoire, counts),
		tether:    d.narr.tetherStats(),
		feed:      d.feed.summary(),
		published: d.feed.published(),
		app:       st,
	})
	var aerr error
	switch {
	case st.ends > 0:
		aerr = fmt.Errorf("%w: %s", d.mode.errLost, st.endedBy)
	case st.gaveUp != "":
		aerr = fmt.Errorf("%w: %s", d.mode.errLost, st.gaveUp)
	}
	return errors.Join(terr, aerr)
}

// tetherError is how the demo reports tether's end: ErrTetherStopped when
// tether stopping is why the demo ended (wrapping its shutdown error, if
// any), the shutdown error otherwise.
func tetherError(why string, err error) error {
	switch {
	case why == "tether stopped" && err == nil:
		return ErrTetherStopped
	case why == "tether stopped":
		return fmt.Errorf("%w: %w", ErrTetherStopped, err)
	case err != nil:
		return fmt.Errorf("tether: %w", err)
	}
	return nil
}
