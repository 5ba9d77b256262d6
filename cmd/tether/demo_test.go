package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// demoTimeout bounds a whole demo run in these tests: the run itself plus
// tether's drain (TETHER_DRAIN_TIMEOUT=1s in the demo) and the client's
// close wait, with room for a loaded machine.
const demoTimeout = 60 * time.Second

// TestDemoRuns plays the README's first command, shortened: the real feed,
// the real sidecar code path and the naive client, with a fault every
// second. The client's socket must survive every fault. The demo counts
// its duration and its fault schedule in the client's events (120 here),
// so a loaded machine makes it slower, not different: with seed 1 a TCP
// reset falls on event 25, and the faults after it on later events as the
// outages before them allow.
func TestDemoRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for 6s")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"demo", "-duration", "6s", "-fault-every", "1s", "-seed", "1"}
	if err := run(ctx, args, map[string]string{}, &out, &errOut); err != nil {
		t.Fatalf("run = %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	s := out.String()
	for _, want := range []string{
		"seed 1 ",
		"  fault   ",                       // at least one fault was injected
		"tether  upstream back on retry #", // and tether reconnected
		// and restored the client's subscription after asking the feed to
		// resume, hiding the repeats
		"session restored on the new connection: resume sent (after the client's last event), subscriptions replayed: 1",
		"the feed resumed the stream where the client left it",
		"1 welcome and 1 subscription answer from the feed",
		"closes: 0",
		"every event reached the client once and in order",
		"summary after",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "!!!") {
		t.Errorf("output reports a failure:\n%s", s)
	}
	if errOut.Len() > 0 {
		t.Errorf("stderr not empty:\n%s", errOut.String())
	}
}

// With seed 4 the first fault is a hiccup: the feed drops events on the
// live connection and repeats two. The narration shows tether filling the
// gap over HTTP and dropping the duplicates, and the summary counts both.
// The fault schedule and the end count the client's events, not time: the
// hiccup falls on event 25 of the 30 of -duration 1.5s, the plan's next
// fault 13 events later, after the last one, so the demo ends once the
// client has event 30 and the events the hiccup cost, however loaded the
// machine.
func TestDemoFillsGapsAndDropsDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for 1.5s")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"demo", "-duration", "1.5s", "-fault-every", "1s", "-seed", "4"}
	if err := run(ctx, args, map[string]string{}, &out, &errOut); err != nil {
		t.Fatalf("run = %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	s := out.String()
	for _, want := range []string{
		"fault   hiccup: the feed drops the next 3 events",
		"in the stream: holding what follows, fetching the missing events over HTTP",
		"filled over HTTP in ",
		"tether  dropped 2 duplicate events the client already has",
		" filled, 0 given up, ",
		"faults   1: 1 hiccup\n",
		"hiccups dropped 3 and repeated 2",
		"every event reached the client once and in order",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "!!!") {
		t.Errorf("output reports a failure:\n%s", s)
	}
}

// TestDemoSSERuns plays `tether demo -sse`, shortened: the SSE feed, the
// real sidecar with an sse:// listener, and the EventSource-like app. The
// fault schedule and the end count the app's events: with seed 8 the feed
// repeats two events (a hiccup) on event 22, resets the stream on event 40,
// and would end it 15 events after the reset's outage, after event 50, the
// last of -duration 2.5s. The demo ends once the app has event 50 and
// tether has resumed the stream, however long that takes on a loaded
// machine. The app's one stream must never end, and it must see every
// event once, in order.
func TestDemoSSERuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the SSE demo for 2.5s")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"demo", "-sse", "-duration", "2.5s", "-fault-every", "1s", "-seed", "8"}
	if err := run(ctx, args, map[string]string{}, &out, &errOut); err != nil {
		t.Fatalf("run = %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	s := out.String()
	for _, want := range []string{
		"tether demo -sse: ",
		"seed 8 ",
		"feed    request #1, no Last-Event-ID: a new stream (retry: 1000, then live events)",
		"tether  accepted the app's EventSource request",
		"fault   hiccup: the feed sends its last 2 events again",
		"faults   2: 1 TCP reset, 1 hiccup\n",
		"tether  dropped 2 duplicate events the app already has",
		"fault   TCP reset: the feed aborts tether's event stream (RST)",
		"(the feed's retry: 1000 as a floor + jitter)", // the server's retry is the backoff's floor
		"feed    request #2 with Last-Event-ID: ",      // tether resumed the feed
		"tether  upstream back on retry #",             // at least one upstream reconnect
		"app     events flow again after ",
		"1 request, stream ends: 0",
		"stream ends: 0, the app's one EventSource request stayed open through every fault.",
		"every event reached the app once and in order.",
		"summary after",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "!!!") {
		t.Errorf("output reports a failure:\n%s", s)
	}
	if errOut.Len() > 0 {
		t.Errorf("stderr not empty:\n%s", errOut.String())
	}
}

// lineSignal is a concurrency-safe buffer that closes a channel once its
// content contains a marker.
type lineSignal struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	seen   chan struct{}
	once   sync.Once
}

func (w *lineSignal) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *lineSignal) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Ctrl-C (the context ending) stops a demo started without -duration
// cleanly: the client closes first, so it still reports closes: 0.
func TestDemoInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	runCtx, interrupt := context.WithCancel(ctx)
	out := &lineSignal{marker: "client  connected to tether", seen: make(chan struct{})}
	var errOut bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(runCtx, []string{"demo", "-fault-every", "1s"}, nil, out, &errOut) }()
	select {
	case <-out.seen:
	case err := <-done:
		t.Fatalf("demo ended before the client connected: %v\n%s", err, out.String())
	case <-ctx.Done():
		t.Fatalf("client never connected:\n%s", out.String())
	}
	interrupt()
	if err := <-done; err != nil {
		t.Fatalf("run after interrupt = %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"interrupted: stopping the faults", "until Ctrl-C", "closes: 0"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

// Ctrl-C stops the SSE demo cleanly too: the app ends its request before
// tether drains, so its stream still counts no end.
func TestDemoSSEInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	runCtx, interrupt := context.WithCancel(ctx)
	out := &lineSignal{marker: "app     opened its EventSource on tether", seen: make(chan struct{})}
	var errOut bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(runCtx, []string{"demo", "-sse", "-fault-every", "1s"}, nil, out, &errOut) }()
	select {
	case <-out.seen:
	case err := <-done:
		t.Fatalf("demo ended before the app connected: %v\n%s", err, out.String())
	case <-ctx.Done():
		t.Fatalf("app never connected:\n%s", out.String())
	}
	interrupt()
	if err := <-done; err != nil {
		t.Fatalf("run after interrupt = %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"interrupted: stopping the faults; the app closes its EventSource", "until Ctrl-C",
		"stream ends: 0, the app's one EventSource request stayed open"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "!!!") {
		t.Errorf("output reports a failure:\n%s", s)
	}
}

func TestDemoBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-bogus"}, "flag provided but not defined"},
		{"bad duration", []string{"-duration", "soon"}, "invalid value"},
		{"negative duration", []string{"-duration", "-1s"}, "-duration"},
		{"faults too often", []string{"-fault-every", "1ms"}, "-fault-every"},
		{"zero rate", []string{"-rate", "0"}, "-rate"},
		{"rate too high", []string{"-rate", "100000"}, "-rate"},
		{"bad seed", []string{"-seed", "-3"}, "invalid value"},
		{"extra argument", []string{"now"}, `unexpected argument "now"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), append([]string{"demo"}, tc.args...), nil, &out, &errOut)
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run = %v, want a usage error mentioning %q", err, tc.want)
			}
			if code := exitCode(err, &bytes.Buffer{}); code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if out.Len() > 0 {
				t.Errorf("a bad flag started the demo:\n%s", out.String())
			}
		})
	}
}

func TestDemoHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"demo", "-h"}, nil, &out, &errOut); err != nil {
		t.Fatalf("run demo -h = %v", err)
	}
	for _, want := range []string{"usage: tether demo", "-duration", "-fault-every", "-seed", "-rate", "-sse"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, errOut.String())
		}
	}
}
