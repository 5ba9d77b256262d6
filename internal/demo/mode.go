package demo

import (
	"context"
	"net"
)

// mode is one of the demo's transports, WebSocket (websocket.go) or
// Server-Sent Events (sse.go): the feed and the app that speak it, the faults
// its feed knows, and the words its story is told in. Everything else (the
// run, the fault schedule, the accounting, the narration, the summary) is
// shared.
type mode struct {
	words
	// repertoire is the feed's faults, in the order the plan deals them.
	repertoire []fault
	// start starts the feed and returns it with tether's configuration for
	// it, as the TETHER_* variables an operator would set.
	start func(opts feedOptions) (feed, map[string]string, error)
	// dial connects the app to tether, listening at addr.
	dial func(ctx context.Context, addr net.Addr, rate int, n *narrator) (app, error)
}

// feed is the demo's upstream: it publishes numbered price events to tether
// and breaks the way its transport's servers break. Safe for concurrent use.
type feed interface {
	// waitHealthy waits until tether streams from the feed on a connection
	// made after the last fault that broke one, so each fault hits a
	// working feed. It returns false when ctx ends first.
	waitHealthy(ctx context.Context) bool
	// inject applies a fault, and reports whether there was a live
	// connection to apply it to.
	inject(k faultKind) bool
	// published is how many events the feed has numbered.
	published() int64
	// unstreamed is how many of them it numbered while not healthy: what
	// its outages cost, which the fault schedule skips.
	unstreamed() int64
	// summary is the feed's line in the final summary.
	summary() string
	// Close stops the feed and waits for its goroutines. It is idempotent.
	Close()
}

// app is the naive app in front of tether: it connects once and counts on
// tether to keep that connection. Safe for concurrent use.
type app interface {
	// Done is closed once the app has stopped reading: after Close, or
	// when its connection ended for good.
	Done() <-chan struct{}
	// Stats is what the app saw so far.
	Stats() appStats
	progress
	// Close ends the app's connection, as the app, and waits for its
	// goroutines. It is idempotent.
	Close()
}

// progress is how far the app's stream has come, which the fault schedule
// and the demo's end go by.
type progress interface {
	// reached returns a channel closed once the app holds every event up
	// to seq (or what stood in for them: a snapshot, a gap notice).
	reached(seq int64) <-chan struct{}
}

// words are what the two demos say differently: the same story, told of a
// socket or of an event stream.
type words struct {
	title          string   // the header's first line
	app            source   // who the app is in the narration: "client", "app"
	conn           string   // what the app keeps to tether: "socket", "stream"
	link           string   // what tether keeps to the feed: "connection", "stream"
	attempt        string   // what tether makes to reach the feed: "dial", "request"
	ends           string   // the app's count of lost connections: "closes", "stream ends"
	appConnected   string   // tether accepted the app
	firstConfirmed string   // tether's first upstream connection was confirmed
	silence        string   // how tether noticed a silent feed
	idleLimit      string   // the bound it went by, a format of ping interval and timeout
	cutShort       string   // a connection that ended without a goodbye (EOF)
	gapWait        string   // what tether does about a gap
	kept           string   // the app's one connection, kept: "the client's one socket"
	lost           string   // the app's connection, lost: "the client's socket was closed"
	stopping       string   // how the app leaves at the end
	gone           string   // why the demo ends when the app has gone
	errLost        error    // what Run returns when the app's connection was lost
	epilogue       []string // the summary's closing sentences
	// header is the header's lines about tether's settings.
	header func(s settings) []string
}

// appName is "the client" or "the app".
func (w words) appName() string { return "the " + string(w.app) }
