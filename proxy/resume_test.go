package proxy_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/template"
	"github.com/tetherproxy/tether/proxy"
)

// feedEvery is how often the resume feed publishes: a steady stream that
// every fault interrupts mid-flow.
const feedEvery = time.Millisecond

func mustResume(t *testing.T, text string) template.ResumeMessage {
	t.Helper()
	var m template.ResumeMessage
	if err := m.UnmarshalText([]byte(text)); err != nil {
		t.Fatalf("resume message %q: %v", text, err)
	}
	return m
}

// resumeExample is docs/design.md's worked example configuration.
func resumeExample(t *testing.T, m proxy.Metrics) func(*proxy.Options) {
	return func(o *proxy.Options) {
		welcome := mustMatch(t, `{"t":"welcome"}`)
		o.Metrics = m
		o.Rules.ConfirmMatch = welcome
		o.Rules.SubscribeMatch = mustMatch(t, `{"t":"sub"}`)
		o.Rules.UnsubscribeMatch = mustMatch(t, `{"t":"unsub"}`)
		o.Rules.SubscriptionKey = mustPath(t, "channel")
		o.Rules.HideOnReconnectMatch = welcome
		o.Rules.SessionMatch = welcome
		o.Rules.SessionPath = mustPath(t, "session")
		o.Rules.SeqPath = mustPath(t, "seq")
		o.Rules.ResyncMatch = mustMatch(t, `{"t":"welcome","resync":true}`)
		o.Rules.ResyncSeqPath = mustPath(t, "seq")
		o.Sequences = proxy.Sequences{
			ResumeMessage: mustResume(t, `{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`),
			GapTimeout:    2 * time.Second,
		}
	}
}

// The resume protocol end to end: across resets, half-open stalls and
// restarts during a steady stream, the app sees one welcome and every
// event once, in order; each reconnect is one recovery by resume, and the
// resume is answered within the bound the configuration gives each fault.
// How long the app then takes to hold the events the outage cost (hundreds
// after a restart, at one per millisecond) is the machine's speed, which
// the configuration does not bound: it is logged, and TestResumeCatchUpTime
// measures it.
// With greetFirst the server welcomes every new connection with a fresh
// session before the resume arrives, and the resume must still name the
// app's session.
func TestResumeProtocolAcrossFaults(t *testing.T) {
	for _, greetFirst := range []bool{false, true} {
		name := "server speaks second"
		if greetFirst {
			name = "server greets first"
		}
		t.Run(name, func(t *testing.T) {
			feed := newResumeFeed(t, 5000, feedEvery, greetFirst)
			m := newCounts()
			e := newTether(t, feed.srv.URL(), resumeExample(t, m))
			a := dialApp(t, e.url, appOptions{})
			a.sendText(t, sub("a"))
			var v seqView
			v.until(t, a, 20)
			faults := []feedFault{faultReset, faultStall, faultRestart, faultReset, faultStall, faultRestart}
			for _, f := range faults {
				start := time.Now()
				f.apply(t, feed)
				r := feed.nextResume(t)
				if r.resync {
					t.Fatalf("%s: the feed answered with a snapshot although its buffer holds 5000 events", f.name)
				}
				within(t, f.name+": resume answered", r.at.Sub(start), 0, f.bound)
				v.until(t, a, r.head)
				t.Logf("%s: resume answered after %v, app caught up after %v", f.name, r.at.Sub(start), time.Since(start))
				v.until(t, a, r.head+20)
			}
			a.expectOpen(t)
			if v.welcomes != 1 || v.snapshots != 0 {
				t.Errorf("app saw %d welcomes and %d snapshots, want 1 and 0", v.welcomes, v.snapshots)
			}
			m.await(t, "recovered resume", len(faults))
			if n := m.get("gap resync") + m.get("gap closed") + m.get("gap skipped"); n != 0 {
				t.Errorf("%d gaps resynced, closed or skipped, want none", n)
			}
			// Each resumed welcome repeats the last number delivered.
			if n := m.get("duplicate"); n < len(faults) {
				t.Errorf("%d duplicates dropped, want at least the %d resumed welcomes", n, len(faults))
			}
		})
	}
}

// When the server's buffer no longer reaches back to the app's last event,
// it answers the resume with a resync welcome and a snapshot: the app sees
// the snapshot, then a consecutive stream from the snapshot's number, and
// still one welcome.
func TestResumeSnapshotWhenBufferTooSmall(t *testing.T) {
	feed := newResumeFeed(t, 20, feedEvery, false)
	m := newCounts()
	e := newTether(t, feed.srv.URL(), resumeExample(t, m))
	a := dialApp(t, e.url, appOptions{})
	a.sendText(t, sub("a"))
	var v seqView
	v.until(t, a, 20)
	// A restart, and before it the feed numbers twice the events it keeps:
	// the resume comes on a connection made after the 1012, so it cannot
	// reach back. Counting on the restart floor instead (300 ms, "300
	// events at one per millisecond") failed under load: the publisher's
	// ticker fires late and drops ticks, and fewer than 20 events came.
	c, _ := feed.take(t)
	feed.number(2 * 20)
	_ = c.CloseWith(1012, "service restart")
	r := feed.nextResume(t)
	if !r.resync {
		t.Fatalf("resume after %d answered with a replay; the buffer of 20 should not reach back", r.after)
	}
	v.until(t, a, r.head+50)
	if v.snapshots != 1 || v.welcomes != 1 {
		t.Errorf("app saw %d snapshots and %d welcomes, want 1 and 1", v.snapshots, v.welcomes)
	}
	m.await(t, "recovered resync", 1)
	if n := m.get("recovered resume"); n != 0 {
		t.Errorf("%d recoveries by resume counted for a snapshot", n)
	}
	a.expectOpen(t)
}

// TestResumeCatchUpTime measures, over repeated TCP resets with the resume
// protocol, the time from the upstream's loss to the app holding every event
// published until the server answered the resume. The figures are logged.
// The median is bounded by the first reconnect delay (a confirmed
// connection resets the backoff to TETHER_BACKOFF_BASE) plus slack; single
// outliers are left to the scheduler of a loaded machine.
func TestResumeCatchUpTime(t *testing.T) {
	const faults = 50
	feed := newResumeFeed(t, 5000, feedEvery, false)
	m := newCounts()
	e := newTether(t, feed.srv.URL(), func(o *proxy.Options) {
		resumeExample(t, m)(o)
		o.Logger = quietLogger(t)
	})
	a := dialApp(t, e.url, appOptions{})
	a.sendText(t, sub("a"))
	var v seqView
	v.until(t, a, 20)
	var took []time.Duration
	for range faults {
		start := time.Now()
		faultReset.apply(t, feed)
		r := feed.nextResume(t)
		v.until(t, a, r.head)
		took = append(took, time.Since(start))
		v.until(t, a, r.head+5)
	}
	slices.Sort(took)
	p50, p99 := took[len(took)/2], took[len(took)*99/100]
	t.Logf("upstream loss → app caught up over %d resets: p50 %v, p99 %v, max %v", faults, p50, p99, took[len(took)-1])
	within(t, "median catch-up", p50, 0, backoffBase+slack)
	m.await(t, "recovered resume", faults)
	a.expectOpen(t)
}
