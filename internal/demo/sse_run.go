package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// The SSE demo's tether: the WebSocket demo's timing (demoSettings), an
// sse:// listener for the app, and the feed's JSON data as the messages.
const (
	// sseListenPath is where tether serves the app's event stream.
	sseListenPath = "/events"
	// sseLinger is how long tether keeps an sse:// session, with its
	// upstream stream and its events, for an app whose stream dropped
	// (TETHER_SSE_LINGER's default).
	sseLinger = 30 * time.Second
	// sseConfirmMatch confirms an upstream stream on its first event, so
	// the backoff counter resets as soon as the feed proves it is serving.
	sseConfirmMatch = `{"t":"event"}`
)

// sseTetherEnv is the configuration the SSE demo's tether runs with, as
// the TETHER_* variables an operator would set. The upstream kind is not
// set: http:// means SSE. TETHER_SSE_FORMAT=data hands each event's data
// on as the message, so TETHER_SEQ_PATH reads the feed's seq in it (the
// json format would wrap the data in a string). The app's events are then
// that data, with tether's own ids.
func sseTetherEnv(upstreamURL string, s settings) map[string]string {
	return map[string]string{
		"TETHER_UPSTREAM_URL":   upstreamURL,
		"TETHER_LISTEN":         "sse://127.0.0.1:0" + sseListenPath,
		"TETHER_ADMIN_LISTEN":   "off",
		"TETHER_SSE_FORMAT":     "data",
		"TETHER_SSE_LINGER":     sseLinger.String(),
		"TETHER_PING_INTERVAL":  s.pingInterval.String(),
		"TETHER_PING_TIMEOUT":   s.pingTimeout.String(),
		"TETHER_BACKOFF_BASE":   s.backoffBase.String(),
		"TETHER_BACKOFF_CAP":    s.backoffCap.String(),
		"TETHER_BACKOFF_JITTER": "full",
		"TETHER_CONFIRM_MATCH":  sseConfirmMatch,
		"TETHER_ACCEPT_WAIT":    "2s",
		"TETHER_DIAL_TIMEOUT":   "2s",
		"TETHER_DRAIN_TIMEOUT":  "1s",

		"TETHER_SEQ_PATH":    seqPath,
		"TETHER_GAP_TIMEOUT": s.gapTimeout.String(),
		"TETHER_GAP_POLICY":  gapPolicy,
		"TETHER_GAP_NOTICE":  gapNotice,
	}
}

// runSSE plays the SSE demo, as Run does the WebSocket one; opts are
// valid.
func runSSE(ctx context.Context, opts Options) error {
	n := newNarrator(opts.Out, time.Now, demoSettings, opts.Verbose)
	n.story.sse = true // before any goroutine narrates
	d := &sseDemo{opts: opts, narr: n}
	return d.run(ctx)
}

// sseDemo is one SSE run's parts, in start order.
type sseDemo struct {
	opts   Options
	narr   *narrator
	feed   *sseFeed
	tether *tetherProc
	app    *eventSource
	faults *sseFaults
}

func (d *sseDemo) run(ctx context.Context) error {
	d.narr.sseHeader(d.opts, demoSettings)
	d.feed = startSSEFeed(sseFeedOptions{
		rate: d.opts.Rate,
		rng:  rand.New(rand.NewPCG(d.opts.Seed, 0x9e1d)),
		now:  time.Now,
		narr: d.narr,
	})
	defer d.feed.Close()
	d.narr.say(srcFeed, "price feed up at %s: text/event-stream, %d numbered events/s (id = seq), "+
		"every stream opens with retry: %d; keeps %ds of events for Last-Event-ID", d.feed.URL(), d.opts.Rate,
		sseRetry.Milliseconds(), sseHistorySeconds)
	d.tether = startTether(ctx, d.opts.Tether, sseTetherEnv(d.feed.URL(), demoSettings), d.narr.logger())
	if err := d.connect(ctx); err != nil || d.app == nil {
		serr := d.tether.shutdown()
		if serr != nil && errors.Is(err, serr) {
			serr = nil // tether's own start-up failure, already in err
		}
		return errors.Join(err, serr)
	}
	d.faults = startSSEFaults(d.feed, newPlanOf(d.opts.Seed, d.opts.FaultEvery, numSSEFaults), d.narr)
	return d.stop(d.watch(ctx))
}

// connect waits for tether and opens the app's stream. It leaves d.app
// nil when ctx ended first.
func (d *sseDemo) connect(ctx context.Context) error {
	addr, err := d.tether.listening(ctx)
	if err != nil || addr == nil {
		return err
	}
	url := "http://" + addr.String() + sseListenPath
	app, err := openEventSource(ctx, url, d.opts.Rate, d.narr)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	d.app = app
	d.narr.say(srcApp, "opened its EventSource on tether at %s (GET, Accept: text/event-stream): "+
		"one request, meant to last the whole demo", url)
	return nil
}

// watch prints the app's periodic summary until the demo should end, and
// says why it ends.
func (d *sseDemo) watch(ctx context.Context) string {
	return watchDemo(ctx, d.opts.Duration, d.tether.done, d.app.Done(),
		"the app's EventSource gave up", func() { d.narr.say(srcApp, "%s", appLine(d.app.Stats())) })
}

// stop shuts the demo down in the order that keeps the app's stream
// honest: faults off, the app closes its request (so tether's drain has no
// stream to end), tether stops, the feed closes. Then the summary.
func (d *sseDemo) stop(why string) error {
	d.narr.say(srcDemo, "%s: stopping the faults; the app closes its EventSource", why)
	counts := d.faults.stop()
	d.app.Close()
	terr := tetherError(why, d.tether.shutdown())
	d.feed.Close()
	st := d.app.Stats()
	d.narr.sseSummary(sseReport{
		elapsed: d.narr.elapsedAt(d.narr.now()),
		seed:    d.opts.Seed,
		faults:  counts,
		tether:  d.narr.tetherStats(),
		feed:    d.feed.Stats(),
		app:     st,
	})
	var aerr error
	switch {
	case st.ends > 0:
		aerr = fmt.Errorf("%w: %s", ErrStreamEnded, st.endedBy)
	case st.gaveUp != "":
		aerr = fmt.Errorf("%w: %s", ErrStreamEnded, st.gaveUp)
	}
	return errors.Join(terr, aerr)
}
