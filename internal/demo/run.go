package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Run plays the demo until ctx ends or opts.Duration has passed: it starts
// the feed, tether in front of it (through opts.Tether) and the naive
// client, injects faults, and narrates to opts.Out. On the way out it stops
// the faults, closes the client with 1000, stops tether, closes the feed and
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
	if opts.SSE {
		return runSSE(ctx, opts)
	}
	d := &demo{opts: opts, narr: newNarrator(opts.Out, time.Now, demoSettings, opts.Verbose)}
	return d.run(ctx)
}

// demo is one run's parts, in start order.
type demo struct {
	opts   Options
	narr   *narrator
	feed   *feed
	tether *tetherProc
	client *client
	faults *faults
}

func (d *demo) run(ctx context.Context) error {
	d.narr.header(d.opts, demoSettings)
	feed, err := startFeed(feedOptions{
		rate: d.opts.Rate,
		rng:  rand.New(rand.NewPCG(d.opts.Seed, 0x9e1d)),
		now:  time.Now,
	})
	if err != nil {
		return err
	}
	d.feed = feed
	defer feed.Close()
	d.narr.say(srcFeed, "price feed up at %s: a welcome with a session id, then %d numbered events/s; "+
		"it keeps %ds of them for resumes and for HTTP catch-up at %s", feed.URL(), d.opts.Rate, replayWindow, feed.CatchUpURL())
	d.tether = startTether(ctx, d.opts.Tether, tetherEnv(feed.URL(), feed.CatchUpURL(), demoSettings), d.narr.logger())
	if err := d.connect(ctx); err != nil || d.client == nil {
		serr := d.tether.shutdown()
		if serr != nil && errors.Is(err, serr) {
			serr = nil // tether's own start-up failure, already in err
		}
		return errors.Join(err, serr)
	}
	d.faults = startFaults(feed, newPlan(d.opts.Seed, d.opts.FaultEvery), d.narr)
	return d.stop(d.watch(ctx))
}

// connect waits for tether and connects the client. It leaves d.client nil
// when ctx ended first.
func (d *demo) connect(ctx context.Context) error {
	addr, err := d.tether.listening(ctx)
	if err != nil || addr == nil {
		return err
	}
	url := "ws://" + addr.String() + "/"
	c, err := dialClient(ctx, url, d.narr)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	d.client = c
	d.narr.say(srcClient, "connected to tether at %s and sent %s; it will never reconnect", url, subMessage)
	return nil
}

// watch prints the client's periodic summary until the demo should end, and
// says why it ends.
func (d *demo) watch(ctx context.Context) string {
	return watchDemo(ctx, d.opts.Duration, d.tether.done, d.client.Done(),
		"the client's socket is gone", func() { d.narr.clientSummary(d.client.Stats()) })
}

// watchDemo calls summary every summaryEvery until the demo should end:
// ctx ends, duration (when > 0) has passed, tether stops or the app is
// gone (appGone says so). It returns why, for the closing line.
func watchDemo(ctx context.Context, duration time.Duration, tetherDone, appDone <-chan struct{},
	appGone string, summary func()) string {
	var deadline <-chan time.Time
	if duration > 0 {
		t := time.NewTimer(duration)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(summaryEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return "interrupted"
		case <-deadline:
			return fmtSetting(duration) + " elapsed"
		case <-tetherDone:
			return "tether stopped"
		case <-appDone:
			return appGone
		case <-tick.C:
			summary()
		}
	}
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

// stop shuts the demo down in the order that keeps the client's socket
// honest: faults off, the client closes with 1000 (so tether's drain has
// no app to close), tether stops, the feed closes. Then the summary.
func (d *demo) stop(why string) error {
	d.narr.say(srcDemo, "%s: stopping the faults; the client closes its socket with 1000", why)
	counts := d.faults.stop()
	d.client.Close()
	terr := tetherError(why, d.tether.shutdown())
	d.feed.Close()
	st := d.client.Stats()
	d.narr.summary(report{
		elapsed: d.narr.elapsedAt(d.narr.now()),
		seed:    d.opts.Seed,
		faults:  counts,
		tether:  d.narr.tetherStats(),
		feed:    d.feed.Stats(),
		client:  st,
	})
	var cerr error
	if st.closes > 0 {
		cerr = fmt.Errorf("%w: %s", ErrClientClosed, st.closedBy)
	}
	return errors.Join(terr, cerr)
}
