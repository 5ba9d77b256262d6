package sequence

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/template"
)

// testTimeout is the gap timeout of most tests; in virtual time its size
// costs nothing.
const testTimeout = 4 * time.Second

// waitBound bounds a wait for a goroutine of the Sequencer (a catch-up
// starting) in real time: far above what it takes, so reaching it is a
// failure, not a slow machine.
const waitBound = 10 * time.Second

// Messages of the tests are "stream/seq" ("/seq" for the unnamed stream),
// "stream/=seq" for a snapshot resetting the stream to seq, and anything
// without a slash for a message that carries no number. A number may end
// in "@epoch" (Fields.Epoch), and be "first..seq" (Fields.First) or
// "prev>seq" (Fields.Prev), and be followed by "#n", which is not read.
func msg(stream string, seq int64) string { return stream + "/" + strconv.FormatInt(seq, 10) }

func snapshot(stream string, seq int64) string { return stream + "/=" + strconv.FormatInt(seq, 10) }

// fieldsOf reads a test message as the session's classification would.
func fieldsOf(m string) Fields {
	stream, num, ok := strings.Cut(m, "/")
	if !ok {
		return Fields{}
	}
	f := Fields{Stream: stream}
	num, _, _ = strings.Cut(num, "#") // "#n" tells identical messages apart
	num, f.Epoch, _ = strings.Cut(num, "@")
	if num == "" {
		return f // "stream/@epoch": an epoch without a number
	}
	if rest, resync := strings.CutPrefix(num, "="); resync {
		f.ResyncSeq, _ = strconv.ParseInt(rest, 10, 64)
		f.Resync = true
		return f
	}
	if first, last, ok := strings.Cut(num, ".."); ok {
		f.First, _ = strconv.ParseInt(first, 10, 64)
		f.HasFirst, num = true, last
	}
	if prev, last, ok := strings.Cut(num, ">"); ok {
		f.Prev, _ = strconv.ParseInt(prev, 10, 64)
		f.HasPrev, num = true, last
	}
	f.Seq, _ = strconv.ParseInt(num, 10, 64)
	f.HasSeq = true
	return f
}

// recApp is an App that records what reached the app: Deliver batches,
// Flush passes the batch on, as the session's batch does. It takes no lock
// on purpose: the Sequencer promises to call it from one holder of the
// delivery turn at a time, and the race detector checks that promise. Read
// it only once the Sequencer's goroutines are known to be done (after Stop,
// or after the goroutine that drove it returned).
type recApp struct {
	batch       []string
	got         []string // flushed, in order
	ids         []string // EventID of every message delivered, in order
	closeCode   int
	closeReason string
	unflushed   int // messages still batched when Close came

	// gate, when set, makes Deliver wait for it to be closed, after
	// closing entered (once).
	gate    chan struct{}
	entered chan struct{}
	// flushes gets a token on every Flush, when it has room: how a test
	// learns that a catch-up's turn reached its end (reply).
	flushes chan struct{}
}

func (a *recApp) Deliver(msgs []buffer.SeqMessage) {
	if a.gate != nil {
		close(a.entered)
		<-a.gate
		a.gate = nil
	}
	for _, m := range msgs {
		a.batch = append(a.batch, string(m.Data)) // copies: Data may be reused
		a.ids = append(a.ids, m.EventID)
	}
}

func (a *recApp) Flush() {
	a.got = append(a.got, a.batch...)
	a.batch = a.batch[:0]
	select {
	case a.flushes <- struct{}{}:
	default:
	}
}

func (a *recApp) Close(code int, reason string) {
	a.closeCode, a.closeReason, a.unflushed = code, reason, len(a.batch)
}

// recMetrics counts the Sequencer's events.
type recMetrics struct {
	mu         sync.Mutex
	duplicates int
	gaps       map[string]int
	recovered  map[string]int
	held       int
}

func newRecMetrics() *recMetrics {
	return &recMetrics{gaps: map[string]int{}, recovered: map[string]int{}}
}

func (m *recMetrics) DuplicateDropped() { m.mu.Lock(); m.duplicates++; m.mu.Unlock() }
func (m *recMetrics) Gap(outcome string) {
	m.mu.Lock()
	m.gaps[outcome]++
	m.mu.Unlock()
}
func (m *recMetrics) Recovered(method string) {
	m.mu.Lock()
	m.recovered[method]++
	m.mu.Unlock()
}
func (m *recMetrics) HeldBytesChanged(d int) { m.mu.Lock(); m.held += d; m.mu.Unlock() }

func (m *recMetrics) snapshot() (dups int, gaps, recovered map[string]int, held int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.duplicates, maps(m.gaps), maps(m.recovered), m.held
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// harness is a Sequencer in virtual time with a recording App, metrics and
// log, and (with fetches) a scripted catch-up.
type harness struct {
	t       *testing.T
	s       *Sequencer
	clock   *virtualClock
	app     *recApp
	metrics *recMetrics
	logs    *observer.ObservedLogs
	fetches *fetcher // nil without Config.Fetch
	start   time.Time
	stopped bool
}

// newHarness starts a Sequencer with cfg; withFetch scripts its catch-ups.
func newHarness(t *testing.T, cfg Config, withFetch bool) *harness {
	t.Helper()
	return newMeteredHarness(t, cfg, withFetch, nil)
}

// newMeteredHarness is newHarness with the held bytes counted on meter, the
// session's memory budget account.
func newMeteredHarness(t *testing.T, cfg Config, withFetch bool, meter buffer.Meter) *harness {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	app := &recApp{flushes: make(chan struct{}, 64)}
	h := &harness{t: t, clock: newVirtualClock(), app: app, metrics: newRecMetrics(), logs: logs}
	h.start = h.clock.Now()
	cfg.Clock = h.clock
	if cfg.GapTimeout == 0 {
		cfg.GapTimeout = testTimeout
	}
	if withFetch {
		h.fetches = &fetcher{calls: make(chan *fetchCall, 16)}
		cfg.Fetch = h.fetches.fetch
	}
	h.s = New(context.Background(), Options{
		Config: cfg, App: h.app, Log: zap.New(core), Metrics: h.metrics,
		Classify: func(data []byte) (Fields, bool) { return fieldsOf(string(data)), false },
		Meter:    meter,
	})
	t.Cleanup(h.stop)
	return h
}

// burst is what the upstream reader does with messages it read in one go
// on connection gen: an Offer each, then its Flush.
func (h *harness) burst(gen uint64, msgs ...string) {
	for _, m := range msgs {
		h.s.Offer(gen, buffer.Message{Data: []byte(m)}, false, fieldsOf(m))
	}
	h.s.Flush()
}

// stop stops the Sequencer once; what the app got can be read after it.
func (h *harness) stop() {
	if !h.stopped {
		h.stopped = true
		h.s.Stop()
	}
}

// expectGot checks what reached the app so far. Call it from the goroutine
// driving the Sequencer, with no catch-up goroutine that may still flush:
// one answered through reply is done, one cancelled is not until Stop.
func (h *harness) expectGot(want ...string) {
	h.t.Helper()
	if !slices.Equal(h.app.got, want) {
		h.t.Fatalf("app got %q, want %q", h.app.got, want)
	}
}

// logged counts the lines with message text.
func (h *harness) logged(text string) int { return h.logs.FilterMessage(text).Len() }

// expectGaps checks the gap outcomes counted so far.
func (h *harness) expectGaps(want map[string]int) {
	h.t.Helper()
	if _, gaps, _, _ := h.metrics.snapshot(); !mapsEqual(gaps, want) {
		h.t.Fatalf("gaps counted %v, want %v", gaps, want)
	}
}

// expectRecovered checks the recoveries counted so far.
func (h *harness) expectRecovered(want map[string]int) {
	h.t.Helper()
	if _, _, rec, _ := h.metrics.snapshot(); !mapsEqual(rec, want) {
		h.t.Fatalf("recoveries counted %v, want %v", rec, want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// fetching reports whether stream's gap has a catch-up in flight: the
// Sequencer's own record, set under its lock when it asks, so it can be
// read without waiting for a goroutine.
func (h *harness) fetching(stream string) bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	gt := h.s.gaps[stream]
	return gt != nil && gt.fetching != nil
}

// fetcher scripts the catch-ups: each call waits for the test to answer it,
// or for its context to end.
type fetcher struct {
	calls chan *fetchCall
}

type fetchCall struct {
	ctx    context.Context
	req    FetchRequest
	answer chan fetchAnswer
}

type fetchAnswer struct {
	msgs []string
	err  error
}

func (f *fetcher) fetch(ctx context.Context, r FetchRequest) ([][]byte, error) {
	c := &fetchCall{ctx: ctx, req: r, answer: make(chan fetchAnswer, 1)}
	f.calls <- c // buffered: a test that expects no call fails on its own
	select {
	case a := <-c.answer:
		var out [][]byte
		for _, m := range a.msgs {
			out = append(out, []byte(m))
		}
		return out, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("gapfill: %w", ctx.Err())
	}
}

// next waits for the next catch-up the Sequencer starts.
func (h *harness) nextFetch() *fetchCall {
	h.t.Helper()
	select {
	case c := <-h.fetches.calls:
		return c
	case <-time.After(waitBound):
		h.t.Fatalf("no catch-up started within %v", waitBound)
		return nil
	}
}

// expectNoFetchStarted checks that no catch-up call reached the fetcher.
// Only meaningful once every started fetch goroutine has run (after Stop).
func (h *harness) expectNoFetchStarted() {
	h.t.Helper()
	select {
	case c := <-h.fetches.calls:
		h.t.Fatalf("unexpected catch-up of %+v", c.req.Gap)
	default:
	}
}

// reply answers c with msgs and waits until the Sequencer has acted on the
// answer: the catch-up's goroutine flushes the App at the end of its turn
// whatever it got, and the reader's Flush that follows waits for that turn
// to end. Only the catch-up may flush meanwhile: every other goroutine of
// the test is waiting.
func (h *harness) reply(c *fetchCall, msgs ...string) {
	h.t.Helper()
	h.answer(c, fetchAnswer{msgs: msgs})
}

// answer is reply with any answer, a failure included.
func (h *harness) answer(c *fetchCall, a fetchAnswer) {
	h.t.Helper()
	for len(h.app.flushes) > 0 {
		<-h.app.flushes // the reader's own
	}
	c.answer <- a
	select {
	case <-h.app.flushes:
	case <-time.After(waitBound):
		h.t.Fatalf("catch-up answer not acted on within %v", waitBound)
	}
	h.s.Flush()
}

func mustNotice(t *testing.T, text string) template.GapNotice {
	t.Helper()
	var n template.GapNotice
	if err := n.UnmarshalText([]byte(text)); err != nil {
		t.Fatalf("notice %q: %v", text, err)
	}
	return n
}

func mustResume(t *testing.T, text string) template.ResumeMessage {
	t.Helper()
	var m template.ResumeMessage
	if err := m.UnmarshalText([]byte(text)); err != nil {
		t.Fatalf("resume %q: %v", text, err)
	}
	return m
}

func msgData(m string) buffer.Message { return buffer.Message{Data: []byte(m)} }

// fieldReason is the "reason" field of a gap given up.
func fieldReason(why string) zap.Field { return zap.String("reason", why) }
