package demo

import (
	"context"
	"fmt"
	"net"
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

// sseMode is `tether demo -sse`: the event-stream feed (sse_feed.go) and
// the EventSource-like app (sse_app.go).
func sseMode() mode {
	return mode{
		words: words{
			title:          "tether demo -sse: a flaky Server-Sent Events price feed, tether in front of it, and an EventSource-like app.",
			app:            srcApp,
			conn:           "stream",
			link:           "stream",
			attempt:        "request",
			ends:           "stream ends",
			appConnected:   "accepted the app's EventSource request: from now on tether keeps that one response open, whatever the upstream does",
			firstConfirmed: "upstream stream open; its first event confirmed it",
			silence:        "silent stream given up: not a byte",
			idleLimit:      "the idle limit, ping interval %s + timeout %s, as SSE has no ping",
			cutShort:       "the response was cut short (unexpected EOF)",
			gapWait:        "waiting up to TETHER_GAP_TIMEOUT for the missing events",
			kept:           "the app's one EventSource request",
			lost:           "the app's stream ended",
			stopping:       "the app closes its EventSource",
			gone:           "the app's EventSource gave up",
			errLost:        ErrStreamEnded,
			epilogue: []string{
				"  on every upstream reconnect tether sent the feed the last id it had as Last-Event-ID, never sooner than",
				"  the feed's retry (or a Retry-After) asked; the feed replayed what the app had not seen, tether dropped",
				"  repeats by their seq, and wrote the rest on the app's one open response, under its own ids.",
			},
			header: func(s settings) []string {
				return []string{
					fmt.Sprintf("  tether: gives an upstream stream up after %s of silence (ping interval %s + timeout %s: SSE has no ping); "+
						"backoff full jitter %s..%s, never sooner than the feed's retry or Retry-After (then + up to %s of jitter)",
						fmtSetting(s.pingInterval+s.pingTimeout), fmtSetting(s.pingInterval), fmtSetting(s.pingTimeout),
						fmtSetting(s.backoffBase), fmtSetting(s.backoffCap), fmtSetting(s.backoffCap)),
					fmt.Sprintf("  tether: resumes the feed with Last-Event-ID; events sequenced by seq in their data (duplicates dropped, "+
						"gaps held, given up after %s with a notice); serves the app on an sse:// listener with its own ids",
						fmtSetting(s.gapTimeout)),
					"  app: one GET with Accept: text/event-stream; like a browser's EventSource it would reconnect with " +
						"Last-Event-ID if its stream ended. Behind tether it never should.",
				}
			},
		},
		repertoire: []fault{
			{faultReset, "TCP reset", "TCP resets", "TCP reset: the feed aborts tether's event stream (RST)"},
			{faultDrop, "dropped connection", "dropped connections",
				"dropped connection: the feed's connection closes mid-response, the stream cut short (a crashed process)"},
			{faultStall, "silent stall", "silent stalls",
				"silent stall: the feed stops writing (no events, no keep-alive comments) but keeps TCP open"},
			{faultEnd, "stream end", "stream ends",
				"stream end: the feed ends the response cleanly, as servers do on a deploy or at a maximum stream age"},
			{faultOverload, "overload", "overloads", fmt.Sprintf(
				"overload: the feed ends the stream and answers the next %d requests with HTTP 503, Retry-After: %d",
				overloadRefusals, overloadRetryAfter)},
			{faultHiccup, "hiccup", "hiccups", fmt.Sprintf(
				"hiccup: the feed sends its last %d events again, without their ids (a glitch that re-delivers them)", sseHiccupRepeat)},
		},
		start: startSSE,
		dial:  dialSSE,
	}
}

// startSSE starts the feed and configures tether for it. The upstream kind
// is not set: http:// means SSE. TETHER_SSE_FORMAT=data hands each event's
// data on as the message, so TETHER_SEQ_PATH reads the feed's seq in it
// (the json format would wrap the data in a string). The app's events are
// then that data, with tether's own ids.
func startSSE(opts feedOptions) (feed, map[string]string, error) {
	f, err := startSSEFeed(opts)
	if err != nil {
		return nil, nil, err
	}
	opts.narr.say(srcFeed, "price feed up at %s: text/event-stream, %d numbered events/s (id = seq), "+
		"every stream opens with retry: %d; keeps %ds of events for Last-Event-ID", f.URL(), opts.rate,
		sseRetry.Milliseconds(), sseHistorySeconds)
	env := tetherEnv(f.URL(), "sse://127.0.0.1:0"+sseListenPath, sseConfirmMatch, demoSettings)
	env["TETHER_SSE_FORMAT"] = "data"
	env["TETHER_SSE_LINGER"] = sseLinger.String()
	return f, env, nil
}

// dialSSE opens the app's EventSource on tether.
func dialSSE(ctx context.Context, addr net.Addr, rate int, n *narrator) (app, error) {
	url := "http://" + addr.String() + sseListenPath
	es, err := openEventSource(ctx, url, rate, n)
	if err != nil {
		return nil, err
	}
	n.say(srcApp, "opened its EventSource on tether at %s (GET, Accept: text/event-stream): "+
		"one request, meant to last the whole demo", url)
	return es, nil
}
