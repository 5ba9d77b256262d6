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
	// Duration ends the demo once the app has the events the feed
	// publishes in this long (Duration·Rate of them) and has seen every
	// fault repaired: as long as that on an idle machine, longer on a
	// loaded one. 0 runs until ctx ends.
	Duration time.Duration
	// FaultEvery is the mean interval between faults, at least MinFaultEvery.
	FaultEvery time.Duration
	// Seed makes the fault sequence (kinds and intervals) reproducible.
	Seed uint64
	// Rate is the feed's events per second, 1 to MaxRate.
	Rate int
	// Verbose also narrates tether's debug and unrecognised log entries.
	Verbose bool
	// SSE plays the Server-Sent Events demo instead of the WebSocket one:
	// an event-stream feed, tether with an sse:// listener, and an
	// EventSource-like app.
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

// The feeds number their events in a seq field: tether sequences them by it
// (duplicates dropped, successors of a gap held) and, when a gap cannot be
// filled within the gap timeout, gives it up and tells the app so.
const (
	seqPath   = "seq"
	gapPolicy = "notify"
	gapNotice = `{"t":"gap","from":{{.From}},"to":{{.To}}}`
)

// tetherEnv is the configuration both demos' tether runs with, as the
// TETHER_* variables an operator would set: the upstream, the app's
// listener, the demo's timing, the message that confirms a connection, and
// sequencing by seq. Each mode adds its own.
func tetherEnv(upstreamURL, listen, confirm string, s settings) map[string]string {
	return map[string]string{
		"TETHER_UPSTREAM_URL":   upstreamURL,
		"TETHER_LISTEN":         listen,
		"TETHER_ADMIN_LISTEN":   "off",
		"TETHER_PING_INTERVAL":  s.pingInterval.String(),
		"TETHER_PING_TIMEOUT":   s.pingTimeout.String(),
		"TETHER_BACKOFF_BASE":   s.backoffBase.String(),
		"TETHER_BACKOFF_CAP":    s.backoffCap.String(),
		"TETHER_BACKOFF_JITTER": "full",
		"TETHER_CONFIRM_MATCH":  confirm,
		"TETHER_ACCEPT_WAIT":    "2s",
		"TETHER_DIAL_TIMEOUT":   "2s",
		"TETHER_DRAIN_TIMEOUT":  "1s",

		"TETHER_SEQ_PATH":    seqPath,
		"TETHER_GAP_TIMEOUT": s.gapTimeout.String(),
		"TETHER_GAP_POLICY":  gapPolicy,
		"TETHER_GAP_NOTICE":  gapNotice,
	}
}
