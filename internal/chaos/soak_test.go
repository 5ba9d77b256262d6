package chaos_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/binarytest"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// defaultSoak is how long faults are injected when TETHER_SOAK_DURATION is
// not set: long enough for a few hundred faults, short enough for CI.
const defaultSoak = 45 * time.Second

// The configuration of the soak: the heartbeat detects a blackhole within
// pingInterval+pingTimeout, a 1012 keeps tether away restartFloor.
const (
	pingInterval = 100 * time.Millisecond
	pingTimeout  = 100 * time.Millisecond
	backoffBase  = 20 * time.Millisecond
	backoffCap   = 200 * time.Millisecond
	dialTimeout  = time.Second
	restartFloor = 100 * time.Millisecond
	stableAfter  = 50 * time.Millisecond
	// closeWait is the server's wait for tether's close frame after a
	// 1001 or 1012 (upstreamtest's default).
	closeWait = time.Second
	// slack covers timer and scheduling delays under -race on a loaded
	// machine.
	slack = time.Second

	publishEvery = 2 * time.Millisecond
	sendEvery    = 10 * time.Millisecond
	// outboxMessages is TETHER_OUTBOX_MAX_MESSAGES: ten seconds of the
	// app's messages (see soakEnv).
	outboxMessages = int(10 * time.Second / sendEvery)
)

// settle bounds how long, once the faults stop, tether takes to be
// connected and caught up: a dial started into a fault completes (at most
// the dial timeout), a connection that died just before is detected by the
// heartbeat, a 1012 floor and the longest backoff pass, and a server close
// in progress waits for its close frame.
const settle = dialTimeout + pingInterval + pingTimeout + restartFloor + backoffCap + closeWait + slack

// quiet is how long the app keeps reading after the ledger balances, to
// catch a late duplicate (an ack or event delivered twice): a heartbeat
// round and then some.
const quiet = pingInterval + pingTimeout + 300*time.Millisecond

// TestChaosSoak runs docs/design.md's worked example under random faults for
// TETHER_SOAK_DURATION and checks the ledger (see doc.go). TETHER_SOAK_SEED
// replays a fault schedule.
func TestChaosSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos soak skipped with -short")
	}
	duration := soakDuration(t)
	seed := soakSeed(t)
	t.Logf("chaos soak: %v of faults, seed %d (TETHER_SOAK_SEED=%d replays the schedule)", duration, seed, seed)

	// The buffer holds every event of the soak, so every fault is
	// recoverable by resume.
	keep := int(duration/publishEvery) + int((settle+quiet)/publishEvery) + 1024
	f := newFeed(t, keep, publishEvery)
	fp, err := upstreamtest.NewFaultProxy(f.srv.Addr())
	if err != nil {
		t.Fatalf("upstreamtest.NewFaultProxy: %v", err)
	}
	t.Cleanup(func() { _ = fp.Close() })
	p := startTether(t, fp.URL())
	watch := &watcher{p: p}

	a := dialApp(t, "ws://"+p.Listener("ws")+"/", dialTimeout+slack)
	a.send(t, `{"t":"sub","channel":"a"}`)
	if !a.waitFor(settle, func(l *appLedger) bool { return l.events > 0 }) {
		t.Fatalf("no event reached the app within %v of subscribing", settle)
	}
	a.startSending(sendEvery)
	heap := startHeapSampler(p)
	began := time.Now()
	in := startInjector(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), fp, f, watch)
	soakFor(duration, a)
	faults, undetected := in.stopAndHeal()
	// The heap is sampled while the soak's traffic runs: once it stops,
	// tether allocates too little for a GC to run, and the live heap would
	// stay at whatever the last one found. What tether relayed meanwhile is
	// every event published (each reaches the app, the ledger checks it),
	// every message the app sent and every ack it got.
	samples, herr := heap.stopAndRead()
	run := time.Since(began)
	sl := a.snapshot()
	relayed := int(f.headNow()) + len(sl.sent) + len(sl.acks)
	if undetected > 0 {
		t.Errorf("%d of %d blackholes of a confirmed upstream lasted over %v without the heartbeat declaring it lost",
			undetected, faults[faultBlackhole], blackholeMin)
	}
	a.stopSending()

	head := settleAndStop(t, a, f)
	checkLedger(t, a.snapshot(), f.ledger(), head)
	if err := watch.firstErr(); err != nil {
		t.Errorf("reading tether's upstream state: %v", err)
	}
	logSummary(t, p, faults, a.snapshot(), f.ledger())
	checkHeap(t, samples, herr, relayed, run)
}

// soakFor waits out the soak, or less if the app's socket ends (the ledger
// then fails and the rest of the soak would show nothing more).
func soakFor(d time.Duration, a *app) {
	a.waitFor(d, func(l *appLedger) bool { return l.ended != "" })
}

func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("TETHER_SOAK_DURATION")
	if v == "" {
		return defaultSoak
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("TETHER_SOAK_DURATION=%q: want a positive duration such as 45s", v)
	}
	return d
}

func soakSeed(t *testing.T) uint64 {
	t.Helper()
	v := os.Getenv("TETHER_SOAK_SEED")
	if v == "" {
		return rand.Uint64()
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("TETHER_SOAK_SEED=%q: want an unsigned integer", v)
	}
	return seed
}

// settleAndStop waits, after the faults, for the app to catch up with the
// live stream, stops the publisher, and waits for the app to hold the last
// event and an ack for every message it sent; then it keeps reading for
// the quiet period. It returns the server's last event number.
func settleAndStop(t *testing.T, a *app, f *feed) int64 {
	t.Helper()
	target := f.headNow()
	if !a.waitFor(settle, func(l *appLedger) bool { return l.lastSeq >= target || l.ended != "" }) {
		t.Errorf("app not caught up with event %d within %v of the faults stopping", target, settle)
	}
	f.stopPublishing()
	head := f.headNow()
	balanced := a.waitFor(settle, func(l *appLedger) bool {
		return l.ended != "" || (l.lastSeq >= head && len(l.acks) >= len(l.sent))
	})
	if !balanced {
		l := a.snapshot()
		t.Errorf("within %v: app at event %d of %d, %d of %d messages acknowledged",
			settle, l.lastSeq, head, len(l.acks), len(l.sent))
	}
	a.waitFor(quiet, func(l *appLedger) bool { return l.ended != "" })
	return head
}

// checkLedger compares what the app saw with what the server published
// and received.
func checkLedger(t *testing.T, l appLedger, fl feedLedger, head int64) {
	t.Helper()
	if l.ended != "" {
		t.Errorf("the app's socket ended: %s", l.ended)
	}
	for _, v := range l.violations {
		t.Errorf("app: %s", v)
	}
	for _, v := range fl.anomalies {
		t.Errorf("server: %s", v)
	}
	if l.welcomes != 1 {
		t.Errorf("app saw %d welcomes, want 1", l.welcomes)
	}
	if l.firstSeq != 1 || l.lastSeq != head || int64(l.events) != head {
		t.Errorf("app saw %d events numbered %d..%d, want %d numbered 1..%d", l.events, l.firstSeq, l.lastSeq, head, head)
	}
	checkMessages(t, l, fl)
}

// checkMessages reports every message id that did not reach the server or
// was not acknowledged to the app exactly once, as counts with a few
// examples: a broken session would otherwise print one line per message.
func checkMessages(t *testing.T, l appLedger, fl feedLedger) {
	t.Helper()
	var lost, badAck, stray []string
	sent := make(map[string]bool, len(l.sent))
	for _, id := range l.sent {
		sent[id] = true
		if fl.received[id] == 0 {
			lost = append(lost, id)
		}
		if n := l.acks[id]; n != 1 {
			badAck = append(badAck, id+"×"+strconv.Itoa(n))
		}
	}
	for id := range l.acks {
		if !sent[id] {
			stray = append(stray, id)
		}
	}
	reportIDs(t, "messages never reached the server", lost)
	reportIDs(t, "messages not acknowledged to the app exactly once (id×acks)", badAck)
	reportIDs(t, "acks for messages the app never sent", stray)
}

func reportIDs(t *testing.T, what string, ids []string) {
	t.Helper()
	if len(ids) > 0 {
		t.Errorf("%d %s, first: %v", len(ids), what, ids[:min(len(ids), 5)])
	}
}

func logSummary(t *testing.T, p *binarytest.Process, faults map[string]int, l appLedger, fl feedLedger) {
	t.Helper()
	total := 0
	for _, n := range faults {
		total += n
	}
	resent := 0
	for _, id := range l.sent {
		resent += max(fl.received[id]-1, 0)
	}
	m, err := p.Metrics(context.Background())
	if err != nil {
		t.Errorf("tether's metrics after the soak: %v", err)
		return
	}
	gap := func(outcome string) int { return int(m[`tether_gaps_total{outcome="`+outcome+`"}`]) }
	t.Logf("faults: %d (%s); handshakes refused with 503: %d", total, formatCounts(faults), fl.refused)
	t.Logf("reconnects: %d upstream losses, %d resumes answered, longest outage (loss → confirmed) at most %v, max catch-up %d events",
		int(m["tether_upstream_disconnects_total"]), fl.resumes, longestOutage(m), fl.maxReplay)
	t.Logf("events: %d published, %d seen by the app (1..%d), %d duplicates dropped by tether, gaps resync/closed/skipped %d/%d/%d",
		fl.head, l.events, l.lastSeq, int(m["tether_duplicates_dropped_total"]), gap("resync"), gap("closed"), gap("skipped"))
	t.Logf("messages: %d sent by the app, %d distinct ids at the server, %d re-sent copies, %d acknowledged to the app; app socket ended: %t",
		len(l.sent), len(fl.received), resent, len(l.acks), l.ended != "")
}

// soakEnv is docs/design.md's worked example configuration with the soak's
// short durations. The outbox holds far more than the app sends during the
// longest outage, so overflow (which closes the app) means a leak of
// acknowledged messages, not a slow reconnect.
//
// Its message cap, outboxMessages, also bounds the window of recent ack ids
// each session keeps to hide repeated acks: the cap is what the app sends
// in ten seconds, so that window is full within the first half of the
// default soak, and the heap check's second half sees tether at its working
// size (with a cap of 16,384 the window took the first three minutes to
// fill, a rise the check would read as a leak).
func soakEnv(upstreamURL string) map[string]string {
	return map[string]string{
		"TETHER_UPSTREAM_URL":            upstreamURL,
		"TETHER_LISTEN":                  "127.0.0.1:0",
		"TETHER_DIAL_TIMEOUT":            dialTimeout.String(),
		"TETHER_BACKOFF_JITTER":          "full",
		"TETHER_BACKOFF_BASE":            backoffBase.String(),
		"TETHER_BACKOFF_CAP":             backoffCap.String(),
		"TETHER_STABLE_AFTER":            stableAfter.String(),
		"TETHER_RESTART_FLOOR":           restartFloor.String(),
		"TETHER_TRY_AGAIN_FLOOR":         restartFloor.String(),
		"TETHER_AUTH_FAILURES_MAX":       "3",
		"TETHER_PING_INTERVAL":           pingInterval.String(),
		"TETHER_PING_TIMEOUT":            pingTimeout.String(),
		"TETHER_MAX_MESSAGE_BYTES":       "1MiB",
		"TETHER_ACCEPT_WAIT":             dialTimeout.String(),
		"TETHER_OUTBOX_MAX_MESSAGES":     strconv.Itoa(outboxMessages),
		"TETHER_OUTBOX_MAX_BYTES":        "16MiB",
		"TETHER_OUTBOX_OVERFLOW":         "close",
		"TETHER_MAX_SESSIONS":            "4",
		"TETHER_DOWNSTREAM_BUFFER_BYTES": "4MiB",
		"TETHER_CONFIRM_MATCH":           `{"t":"welcome"}`,
		"TETHER_SUBSCRIBE_MATCH":         `{"t":"sub"}`,
		"TETHER_UNSUBSCRIBE_MATCH":       `{"t":"unsub"}`,
		"TETHER_SUBSCRIPTION_KEY":        "channel",
		"TETHER_HIDE_ON_RECONNECT_MATCH": `{"t":"welcome"}`,
		"TETHER_ACK_ID_PATH":             "id",
		"TETHER_ACK_MATCH":               `{"t":"ack"}`,
		"TETHER_SESSION_MATCH":           `{"t":"welcome"}`,
		"TETHER_SESSION_PATH":            "session",
		"TETHER_RESUME_MESSAGE":          `{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`,
		"TETHER_SEQ_PATH":                "seq",
		"TETHER_RESYNC_MATCH":            `{"t":"welcome","resync":true}`,
		"TETHER_RESYNC_SEQ_PATH":         "seq",
		"TETHER_GAP_TIMEOUT":             settle.String(),
	}
}

// startTether runs the tether binary (built with -race when the test runs
// with it) on soakEnv, as a process of its own so that its heap is its
// alone. Cleanup stops it and checks that it drained and exited 0 (a race
// the detector found makes it exit 66).
func startTether(t *testing.T, upstreamURL string) *binarytest.Process {
	t.Helper()
	bin := ""
	if raceEnabled {
		bin = binarytest.BuildRace(t)
	} else {
		bin = binarytest.Build(t)
	}
	p := binarytest.Start(t, bin, soakEnv(upstreamURL))
	t.Cleanup(func() {
		p.Stop()
		if err := p.Exited(); err != nil {
			t.Errorf("tether exited with %v after SIGTERM, want 0\n%s", err, p.Log())
		}
	})
	return p
}
