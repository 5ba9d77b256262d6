package chaos_test

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/rules"
	"github.com/tetherproxy/tether/internal/template"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
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

// TestChaosSoak runs DESIGN.md's worked example under random faults for
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
	m := newCounts()
	out := &outages{}
	url := startTether(t, soakOptions(t, fp.URL(), m, out))

	a := dialApp(t, url, dialTimeout+slack)
	a.send(t, `{"t":"sub","channel":"a"}`)
	if !a.waitFor(settle, func(l *appLedger) bool { return l.events > 0 }) {
		t.Fatalf("no event reached the app within %v of subscribing", settle)
	}
	a.startSending(sendEvery)
	in := startInjector(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), fp, f, out)
	soakFor(duration, a)
	faults, undetected := in.stopAndHeal()
	if undetected > 0 {
		t.Errorf("%d of %d blackholes of a confirmed upstream lasted over %v without the heartbeat declaring it lost",
			undetected, faults[faultBlackhole], blackholeMin)
	}
	a.stopSending()

	head := settleAndStop(t, a, f)
	checkLedger(t, a.snapshot(), f.ledger(), head)
	logSummary(t, faults, a.snapshot(), f.ledger(), m, out)
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

func logSummary(t *testing.T, faults map[string]int, l appLedger, fl feedLedger, m *counts, out *outages) {
	t.Helper()
	total := 0
	for _, n := range faults {
		total += n
	}
	lost, longest := out.summary()
	resent := 0
	for _, id := range l.sent {
		resent += max(fl.received[id]-1, 0)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > maxHeapInuse {
		t.Errorf("heap in use after the soak: %d KiB, want at most %d KiB", ms.HeapInuse>>10, maxHeapInuse>>10)
	}
	t.Logf("faults: %d (%s); handshakes refused with 503: %d", total, formatCounts(faults), fl.refused)
	t.Logf("reconnects: %d upstream losses, %d resumes answered, longest outage (loss → confirmed) %v, max catch-up %d events",
		lost, fl.resumes, longest.Round(time.Millisecond), fl.maxReplay)
	t.Logf("events: %d published, %d seen by the app (1..%d), %d duplicates dropped by tether, gaps resync/closed/skipped %d/%d/%d",
		fl.head, l.events, l.lastSeq, m.get("duplicate"), m.get("gap resync"), m.get("gap closed"), m.get("gap skipped"))
	t.Logf("messages: %d sent by the app, %d distinct ids at the server, %d re-sent copies, %d acknowledged to the app; app socket ended: %t",
		len(l.sent), len(fl.received), resent, len(l.acks), l.ended != "")
	t.Logf("heap in use at the end: %d KiB", ms.HeapInuse>>10)
}

// maxHeapInuse bounds the heap after the soak: every buffer tether keeps is
// capped by configuration (outbox, hold, downstream queue), so a soak of any
// length must end well below it.
const maxHeapInuse = 64 << 20

func mustMatch(t *testing.T, pattern string) *rules.Matcher {
	t.Helper()
	mt, err := rules.Compile(pattern)
	if err != nil {
		t.Fatalf("Compile(%q): %v", pattern, err)
	}
	return mt
}

func mustPath(t *testing.T, path string) rules.Path {
	t.Helper()
	p, err := rules.ParsePath(path)
	if err != nil {
		t.Fatalf("ParsePath(%q): %v", path, err)
	}
	return p
}

func mustCodes(t *testing.T, s string) upstream.CodeSet {
	t.Helper()
	cs, err := upstream.ParseCodeSet(s)
	if err != nil {
		t.Fatalf("ParseCodeSet(%q): %v", s, err)
	}
	return cs
}

func mustResume(t *testing.T, text string) template.ResumeMessage {
	t.Helper()
	var rm template.ResumeMessage
	if err := rm.UnmarshalText([]byte(text)); err != nil {
		t.Fatalf("resume message %q: %v", text, err)
	}
	return rm
}

// soakOptions is DESIGN.md's worked example configuration with the soak's
// short durations. The outbox holds far more than the app sends during the
// longest outage, so overflow (which closes the app) means a leak of
// acknowledged messages, not a slow reconnect.
func soakOptions(t *testing.T, upstreamURL string, m *counts, out *outages) proxy.Options {
	welcome := mustMatch(t, `{"t":"welcome"}`)
	return proxy.Options{
		Upstream: upstream.Options{
			URL:         upstreamURL,
			DialTimeout: dialTimeout,
			Backoff:     upstream.Backoff{Jitter: upstream.JitterFull, Base: backoffBase, Cap: backoffCap},
			StableAfter: stableAfter,
			Close: upstream.ClosePolicy{
				Permanent:     mustCodes(t, upstream.DefaultPermanentCodes),
				Reauth:        mustCodes(t, upstream.DefaultReauthCodes),
				RestartFloor:  restartFloor,
				TryAgainFloor: restartFloor,
			},
			AuthFailuresMax: 3,
			PingInterval:    pingInterval,
			PingTimeout:     pingTimeout,
			MaxMessageBytes: 1 << 20,
			Confirm:         welcome.Match,
			OnState:         out.record,
		},
		AcceptWait:            dialTimeout,
		OutboxMaxMessages:     1 << 14,
		OutboxMaxBytes:        16 << 20,
		OutboxOverflow:        buffer.OverflowClose,
		MaxSessions:           4,
		MaxMessageBytes:       1 << 20,
		DownstreamBufferBytes: 4 << 20,
		HandshakeTimeout:      2 * time.Second,
		Logger:                zaptest.NewLogger(t, zaptest.Level(zapcore.ErrorLevel)),
		Metrics:               m,
		Rules: proxy.Rules{
			SubscribeMatch:       mustMatch(t, `{"t":"sub"}`),
			UnsubscribeMatch:     mustMatch(t, `{"t":"unsub"}`),
			SubscriptionKey:      mustPath(t, "channel"),
			HideOnReconnectMatch: welcome,
			AckIDPath:            mustPath(t, "id"),
			AckMatch:             mustMatch(t, `{"t":"ack"}`),
			Sequences: proxy.Sequences{
				SessionMatch:  welcome,
				SessionPath:   mustPath(t, "session"),
				ResumeMessage: mustResume(t, `{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`),
				SeqPath:       mustPath(t, "seq"),
				ResyncMatch:   mustMatch(t, `{"t":"welcome","resync":true}`),
				ResyncSeqPath: mustPath(t, "seq"),
				GapTimeout:    settle,
			},
		},
	}
}

// startTether serves opts on a loopback listener and returns the app URL.
// Cleanup shuts it down and checks that Serve returned cleanly.
func startTether(t *testing.T, opts proxy.Options) string {
	t.Helper()
	srv, err := proxy.New(opts)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), settle)
		defer cancel()
		if err := srv.Shutdown(ctx, 0); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "ws://" + ln.Addr().String() + "/"
}
