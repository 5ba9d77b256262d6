package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherproxy/tether/internal/sse/ssetest"
)

// The SSE feed's behaviour.
const (
	// sseRetry is the "retry" field the feed opens every stream with, as
	// many servers do: tether takes it as a floor under its backoff.
	sseRetry = time.Second
	// sseHistorySeconds is how much history the feed keeps for resumes,
	// in seconds of events: well beyond the longest outage the faults
	// cause (an overload's two refusals, each followed by a Retry-After
	// plus up to the backoff cap of jitter), so every resume is a replay.
	sseHistorySeconds = 60
	// sseFeedHeartbeat is the idle time after which the feed writes a
	// ": keep-alive" comment, as servers do to keep proxies from closing
	// a quiet stream. It is half tether's idle limit (ping interval +
	// timeout), so even a slow -rate never looks dead to tether.
	sseFeedHeartbeat = 500 * time.Millisecond
	// ssePath is the feed's stream path; any path serves the same stream.
	ssePath = "/prices"
)

// sseFeedStats is what the feed's requests say about how its events
// reached tether.
type sseFeedStats struct {
	published int64 // events numbered
	requests  int   // requests tether made
	fresh     int   // answered with a stream from now on (no Last-Event-ID)
	resumed   int   // answered with a stream resumed after their Last-Event-ID
	replayed  int64 // events replayed to resumed streams
	lost      int64 // events a resume asked for that the history no longer held
	refused   int   // answered with a 503
}

// sseFeed is the SSE demo's upstream: a price feed on ssetest.Server. It
// numbers its events from 1 (the id of each is its number, and the JSON
// data carries it as seq), opens every stream with "retry: 1000", keeps
// sseHistorySeconds of events and answers a request carrying a numeric
// Last-Event-ID with the events after it before the live ones. Numbering
// starts with tether's first stream, so the app's stream begins at 1.
//
// Two goroutines: the publisher, and a watcher that narrates each request
// as the feed sees it (the Last-Event-ID tether sent, what was replayed,
// what was refused). Its fault methods act on the live streams; all methods
// are safe for concurrent use.
type sseFeed struct {
	srv  *ssetest.Server
	rate int
	rng  *rand.Rand // the price walk; publisher goroutine only
	now  func() time.Time
	narr *narrator

	cancel    context.CancelFunc
	wg        sync.WaitGroup // the publisher and the watcher
	published atomic.Int64
	once      sync.Once

	mu     sync.Mutex
	recent []string // the data of the latest sseHiccupRepeat events, oldest first
}

// sseFeedOptions configures an sseFeed.
type sseFeedOptions struct {
	rate int        // events per second
	rng  *rand.Rand // the price walk
	now  func() time.Time
	narr *narrator // nil narrates nothing (tests of the feed alone)
}

// startSSEFeed listens on 127.0.0.1:0 and starts the publisher and the
// watcher.
func startSSEFeed(opts sseFeedOptions) *sseFeed {
	f := &sseFeed{
		srv: ssetest.NewServer(ssetest.Options{
			History:   sseHistorySeconds * opts.rate,
			Retry:     sseRetry,
			Heartbeat: sseFeedHeartbeat,
			Now:       opts.now,
		}),
		rate: opts.rate,
		rng:  opts.rng,
		now:  opts.now,
		narr: opts.narr,
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.wg.Add(2)
	go func() { defer f.wg.Done(); f.publish(ctx) }()
	go func() { defer f.wg.Done(); f.watch(ctx) }()
	return f
}

// URL is the feed's http:// stream address.
func (f *sseFeed) URL() string { return f.srv.URL() + ssePath }

// Close stops the goroutines and the server (every stream ends); it waits
// for all of them and is idempotent.
func (f *sseFeed) Close() {
	f.once.Do(func() {
		f.cancel()
		f.wg.Wait()
		f.srv.Close()
	})
}

// Stats tallies the requests tether made so far.
func (f *sseFeed) Stats() sseFeedStats {
	st := sseFeedStats{published: f.published.Load()}
	for _, r := range f.srv.Requests() {
		st.requests++
		switch {
		case r.Status != http.StatusOK:
			st.refused++
		case r.LastEventID == "":
			st.fresh++
		default:
			st.resumed++
			st.replayed += int64(r.Replayed)
		}
		if r.GapFrom > 0 {
			st.lost += int64(r.GapTo - r.GapFrom + 1)
		}
	}
	return st
}

// publish numbers and publishes events at the configured rate, from
// tether's first stream until ctx ends.
func (f *sseFeed) publish(ctx context.Context) {
	if f.srv.WaitStreams(ctx, 1) != nil {
		return
	}
	epoch := f.now()
	price := 100.0
	t := time.NewTicker(time.Second / time.Duration(f.rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var to int64
		epoch, to = dueEvents(epoch, f.now(), f.rate, f.published.Load())
		for seq := f.published.Load() + 1; seq <= to; seq++ {
			price = max(1, price+(f.rng.Float64()-0.5)*0.2)
			// Only this goroutine publishes, so the id Publish gives the
			// event is seq: the data's number and the SSE id agree.
			data := fmt.Sprintf(`{"t":"event","seq":%d,"price":%.2f}`, seq, price)
			id := f.srv.Publish(ssetest.Event{Data: data})
			f.published.Store(int64(id))
			f.remember(data)
		}
	}
}

// remember keeps data among the recent events a hiccup repeats.
func (f *sseFeed) remember(data string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recent = append(f.recent, data)
	if len(f.recent) > sseHiccupRepeat {
		f.recent = f.recent[1:]
	}
}

// dueEvents returns the number of the last event due at now, for events
// at rate per second from epoch, of which published are out. A ticker
// fires late on a busy machine, so each tick catches up, at most one
// second's worth at once: after a longer pause (a suspended laptop) the
// schedule moves on, and the returned epoch with it, instead of flooding
// tether.
func dueEvents(epoch, now time.Time, rate int, published int64) (time.Time, int64) {
	r := int64(rate)
	due := int64(now.Sub(epoch)/time.Millisecond) * r / 1000
	if behind := due - published; behind > r {
		epoch = epoch.Add(time.Duration(behind-r) * time.Second / time.Duration(rate))
		due = published + r
	}
	return epoch, max(due, published)
}

// watch narrates each request tether makes, as the feed answers it.
func (f *sseFeed) watch(ctx context.Context) {
	seen := 0
	for {
		reqs, err := f.srv.WaitRequests(ctx, seen+1)
		if err != nil {
			return
		}
		for _, r := range reqs[seen:] {
			if f.narr != nil {
				f.narr.sayAt(r.Time, srcFeed, requestLine(r))
			}
		}
		seen = len(reqs)
	}
}

// requestLine says how the feed answered one of tether's requests.
func requestLine(r ssetest.Request) string {
	switch {
	case r.Status != http.StatusOK:
		return fmt.Sprintf("refused request #%d: HTTP %d%s", r.N, r.Status, headerNote(r))
	case r.LastEventID == "":
		return fmt.Sprintf("request #%d, no Last-Event-ID: a new stream (retry: %d, then live events)",
			r.N, sseRetry.Milliseconds())
	}
	after, _ := strconv.ParseInt(r.LastEventID, 10, 64)
	line := fmt.Sprintf("request #%d with Last-Event-ID: %s: ", r.N, r.LastEventID)
	switch {
	case r.GapFrom > 0:
		line += fmt.Sprintf("events %d–%d are no longer kept; replaying %s from %d", r.GapFrom, r.GapTo,
			plural(int64(r.Replayed), "event", "events"), r.GapTo+1)
	case r.Replayed == 0:
		line += "nothing was published since; live events follow"
	case r.Replayed == 1:
		line += fmt.Sprintf("replaying the 1 event it missed (%d), then live", after+1)
	default:
		line += fmt.Sprintf("replaying the %d events it missed (%d–%d), then live", r.Replayed, after+1, after+int64(r.Replayed))
	}
	return line
}

// headerNote quotes a refusal's Retry-After.
func headerNote(r ssetest.Request) string {
	if r.Status == http.StatusServiceUnavailable {
		return ", Retry-After: " + strconv.Itoa(overloadRetryAfter)
	}
	return ""
}

// waitHealthy waits until a request newer than the first after ones has
// been answered with a stream, and that stream is the only one open (a
// stalled one has been given up by tether): a fault then hits a working
// feed. It returns false when ctx ends first.
func (f *sseFeed) waitHealthy(ctx context.Context, after int) bool {
	for {
		reqs := f.srv.Requests()
		n := len(reqs)
		if n <= after || reqs[n-1].Status != http.StatusOK {
			if _, err := f.srv.WaitRequests(ctx, n+1); err != nil {
				return false
			}
			continue
		}
		if f.srv.WaitStreams(ctx, 1) != nil {
			return false
		}
		if len(f.srv.Requests()) == n {
			return true
		}
	}
}

// requests returns how many requests the feed has seen.
func (f *sseFeed) requests() int { return len(f.srv.Requests()) }

// Faults. Each reports whether a stream was there to break.

// reset aborts the live streams with a TCP RST.
func (f *sseFeed) reset() bool { return f.srv.ResetAll() > 0 }

// drop closes the live streams' connections mid-response (FIN): the
// chunked body is cut short, as when a process crashes.
func (f *sseFeed) drop() bool { return f.srv.DropAll() > 0 }

// stall silences the live streams (no events, no comments) and keeps
// their connections open.
func (f *sseFeed) stall() bool { return f.srv.StallAll() > 0 }

// end ends the live streams cleanly, as a server does on a deploy.
func (f *sseFeed) end() bool { return f.srv.EndAll() > 0 }

// hiccup sends the latest events again on the live streams, without
// their id lines (a glitch that re-delivers data, not a resume): only
// their seq says they are repeats.
func (f *sseFeed) hiccup() bool {
	f.mu.Lock()
	var b strings.Builder
	for _, data := range f.recent {
		b.WriteString("data: " + data + "\n\n")
	}
	f.mu.Unlock()
	return b.Len() > 0 && f.srv.Raw(b.String()) > 0
}

// overload ends the live streams and answers the next n requests with 503
// and Retry-After. tether waits at least the feed's retry before it asks
// again, so the refusals cannot be queued too late.
func (f *sseFeed) overload(n int) bool {
	if f.srv.EndAll() == 0 {
		return false
	}
	f.srv.RespondNext(n, ssetest.Response{
		Status: http.StatusServiceUnavailable,
		Header: http.Header{"Retry-After": {strconv.Itoa(overloadRetryAfter)}, "Content-Type": {"text/plain"}},
		Body:   "overloaded, try again later\n",
	})
	return true
}
