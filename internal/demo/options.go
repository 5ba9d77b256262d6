package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"go.uber.org/zap"
)

// Limits of the demo's knobs, shared with the command line's validation.
const (
	// MinFaultEvery keeps faults far enough apart for each one to be
	// detected and narrated before the next.
	MinFaultEvery = 100 * time.Millisecond
	// MaxRate bounds the feed: the narration, not throughput, is the point.
	MaxRate = 1000
)

// Default knob values, used by cmd/tether's flags.
const (
	DefaultFaultEvery = 4 * time.Second
	DefaultRate       = 20
)

// TetherFunc runs tether with the TETHER_* variables in env, logging to log,
// until ctx ends; it sends the app listener's address on ready once listening.
// cmd/tether implements it with the sidecar's own LoadConfig and serveProxy.
type TetherFunc func(ctx context.Context, env map[string]string, log *zap.Logger, ready chan<- net.Addr) error

// Options configures Run.
type Options struct {
	// Duration ends the demo after this long; 0 runs until ctx ends.
	Duration time.Duration
	// FaultEvery is the mean interval between faults, at least MinFaultEvery.
	FaultEvery time.Duration
	// Seed makes the fault sequence (kinds and intervals) reproducible.
	Seed uint64
	// Rate is the feed's events per second, 1 to MaxRate.
	Rate int
	// Verbose also narrates tether's debug and unrecognised log entries.
	Verbose bool
	// SSE plays the Server-Sent Events demo (sse_*.go) instead of the
	// WebSocket one: an event-stream feed, tether with an sse:// listener,
	// and an EventSource-like app.
	SSE bool
	// Out receives the narration. Required.
	Out io.Writer
	// Tether runs tether. Required.
	Tether TetherFunc
}

func (o Options) validate() error {
	var errs []error
	if o.Duration < 0 {
		errs = append(errs, fmt.Errorf("duration must be ≥ 0, got %s", o.Duration))
	}
	if o.FaultEvery < MinFaultEvery {
		errs = append(errs, fmt.Errorf("fault interval must be ≥ %s, got %s", MinFaultEvery, o.FaultEvery))
	}
	if o.Rate < 1 || o.Rate > MaxRate {
		errs = append(errs, fmt.Errorf("rate must be 1 to %d events/s, got %d", MaxRate, o.Rate))
	}
	if o.Out == nil {
		errs = append(errs, errors.New("output writer is required"))
	}
	if o.Tether == nil {
		errs = append(errs, errors.New("tether function is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}

// settings are the demo's tether tuning: short enough that every fault is
// detected and repaired within a few seconds, so a new user sees the whole
// cycle without waiting for production-sized timeouts. The narrator quotes
// them to explain tether's choices.
type settings struct {
	pingInterval  time.Duration
	pingTimeout   time.Duration
	backoffBase   time.Duration
	backoffCap    time.Duration
	restartFloor  time.Duration
	tryAgainFloor time.Duration
	gapTimeout    time.Duration
}

var demoSettings = settings{
	pingInterval:  time.Second,
	pingTimeout:   time.Second,
	backoffBase:   200 * time.Millisecond,
	backoffCap:    3 * time.Second,
	restartFloor:  time.Second,
	tryAgainFloor: time.Second,
	gapTimeout:    2 * time.Second,
}

// confirmMatch confirms an upstream connection on the feed's welcome, so
// the backoff counter resets as soon as the feed proves it is serving.
const confirmMatch = `{"t":"welcome"}`

// tether logs the client's subscription (keyed by channel) and replays it
// on every new connection, hides the answer to that replay (the client
// already has its own, matched by request id) and every welcome after the
// first.
const (
	subscribeMatch       = `{"t":"sub"}`
	subscriptionKey      = "channel"
	replyIDPath          = "id"
	hideOnReconnectMatch = `{"t":"welcome"}`
)

// The feed numbers events within a session and keeps a few seconds of them:
// tether sequences them (duplicates dropped, successors of a gap held),
// asks the feed to resume after the last one on every new connection,
// accepts a snapshot when the feed can no longer replay, and fetches what a
// live connection missed over HTTP. This is DESIGN.md's resume-protocol
// example, plus the catch-up endpoint.
const (
	sessionMatch  = `{"t":"welcome"}`
	sessionPath   = "session"
	resumeMessage = `{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`
	seqPath       = "seq"
	resyncMatch   = `{"t":"welcome","resync":true}`
	gapPolicy     = "notify"
	gapNotice     = `{"t":"gap","from":{{.From}},"to":{{.To}}}`
)

// tetherEnv is the configuration the demo's tether runs with, as the
// TETHER_* variables an operator would set. catchUpURL is the feed's HTTP
// catch-up endpoint.
func tetherEnv(upstreamURL, catchUpURL string, s settings) map[string]string {
	return map[string]string{
		"TETHER_UPSTREAM_URL":    upstreamURL,
		"TETHER_LISTEN":          "127.0.0.1:0",
		"TETHER_ADMIN_LISTEN":    "off",
		"TETHER_PING_INTERVAL":   s.pingInterval.String(),
		"TETHER_PING_TIMEOUT":    s.pingTimeout.String(),
		"TETHER_BACKOFF_BASE":    s.backoffBase.String(),
		"TETHER_BACKOFF_CAP":     s.backoffCap.String(),
		"TETHER_BACKOFF_JITTER":  "full",
		"TETHER_RESTART_FLOOR":   s.restartFloor.String(),
		"TETHER_TRY_AGAIN_FLOOR": s.tryAgainFloor.String(),
		"TETHER_CONFIRM_MATCH":   confirmMatch,
		"TETHER_ACCEPT_WAIT":     "2s",
		"TETHER_DIAL_TIMEOUT":    "2s",
		"TETHER_DRAIN_TIMEOUT":   "1s",

		"TETHER_SUBSCRIBE_MATCH":         subscribeMatch,
		"TETHER_SUBSCRIPTION_KEY":        subscriptionKey,
		"TETHER_REPLY_ID_PATH":           replyIDPath,
		"TETHER_HIDE_ON_RECONNECT_MATCH": hideOnReconnectMatch,

		"TETHER_SESSION_MATCH":   sessionMatch,
		"TETHER_SESSION_PATH":    sessionPath,
		"TETHER_RESUME_MESSAGE":  resumeMessage,
		"TETHER_SEQ_PATH":        seqPath,
		"TETHER_RESYNC_MATCH":    resyncMatch,
		"TETHER_RESYNC_SEQ_PATH": seqPath,
		"TETHER_GAPFILL_URL":     catchUpURL + "?from={{.From}}&to={{.To}}",
		"TETHER_GAP_TIMEOUT":     s.gapTimeout.String(),
		"TETHER_GAP_POLICY":      gapPolicy,
		"TETHER_GAP_NOTICE":      gapNotice,
	}
}
