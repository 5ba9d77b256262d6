package proxy_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tetherproxy/tether/proxy"
)

// TestHTTPCatchUpTime measures, over repeated TCP resets of a feed without a
// resume protocol, the time from the upstream's loss to the app holding
// every event published meanwhile: tether reconnects, re-subscribes, sees
// the first live event skip ahead and fetches the missing range over HTTP
// (TETHER_GAPFILL_URL). The figures are logged; README "Recovery timing"
// quotes them. The median is bounded by the first reconnect delay (a
// confirmed connection resets the backoff to TETHER_BACKOFF_BASE) plus
// slack; single outliers are left to the scheduler of a loaded machine.
func TestHTTPCatchUpTime(t *testing.T) {
	const (
		faults = 30
		lost   = 5 // events published while no connection is subscribed
	)
	feed := newChannelFeed(t)
	m := newCounts()
	rules := channelRules(t, m, feed.http.URL)
	e := newTether(t, feed.srv.URL(), func(o *proxy.Options) {
		rules(o)
		// The subscription's answer proves the connection serves: the
		// backoff restarts at its base after every fault, as with the
		// resume feed's welcome, instead of growing because the faults
		// come faster than TETHER_STABLE_AFTER.
		o.Rules.ConfirmMatch = mustMatch(t, `{"t":"subscribed"}`)
	})
	a := dialApp(t, e.url, appOptions{})
	a.sendText(t, sub("a"))
	feed.awaitSubscribed(t, "a")
	v := channelView{}
	var seq int64
	publish := func() {
		var ev string
		seq, ev = feed.number("a")
		feed.send("a", ev)
	}
	publish()
	v.until(t, a, seq, "a")
	var took []time.Duration
	for range faults {
		start := time.Now()
		feed.reset()
		for range lost {
			feed.number("a") // nobody is subscribed: only HTTP has them
		}
		feed.awaitSubscribed(t, "a")
		publish() // the first live event reveals the gap
		v.until(t, a, seq, "a")
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	p50, p99 := took[len(took)/2], took[len(took)*99/100]
	t.Logf("upstream loss → app caught up over HTTP, %d resets, %d events lost each: p50 %v, p99 %v, max %v",
		faults, lost, p50, p99, took[len(took)-1])
	within(t, "median catch-up", p50, 0, backoffBase+slack)
	m.await(t, "recovered http", faults)
	a.expectOpen(t)
}
