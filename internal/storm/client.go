package storm

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

// client is one simulated sidecar: exactly the part of upstream.Client's
// state that decides when it dials next. Everything else the real client does
// between two dials (logging, metrics, token re-reading) takes no virtual
// time and does not change a delay.
type client struct {
	failures  int           // upstream.Client.failures
	lastDelay time.Duration // upstream.Client.lastDelay
}

// fail is upstream.Client.wait without the sleep: count the failure, ask the
// backoff for the delay with the attempt number counted from zero and the
// previous delay, remember the delay for decorrelated jitter. MaxAttempts is
// tether's default 0 (never give up), so the give-up branch never applies.
func (c *client) fail(b upstream.Backoff, floor time.Duration) time.Duration {
	c.failures++
	delay := b.DelayWithFloor(c.failures-1, c.lastDelay, floor)
	c.lastDelay = delay
	return delay
}

// The storm ends when every client is connected, and a simulated connection
// is never lost again, so upstream.Client.confirmed (the one place that
// resets failures and lastDelay) has nothing to reset before the end of a
// run: a client that is accepted leaves the simulation.

// lossFloor is upstream.Client.classify for the close that starts the storm:
// the floor the policy assigns to code, or ErrNoReconnect when the policy
// would stop the client.
func lossFloor(p upstream.ClosePolicy, code int) (time.Duration, error) {
	action, floor := p.Classify(code)
	if action == upstream.ActionStop {
		return 0, ErrNoReconnect
	}
	return floor, nil
}

// rejectFloor is what upstream.Client.classifyStatus returns for the
// server's 503: the Retry-After the dialer parsed from the response (0 when
// absent), or ErrNoReconnect if the status policy ever stopped treating 503
// as transient. The header is written and parsed as on the wire, so a change
// in ParseRetryAfter shows up here too.
func rejectFloor(retryAfter time.Duration) (time.Duration, error) {
	if upstream.ClassifyStatus(http.StatusServiceUnavailable) != upstream.StatusTransient {
		return 0, ErrNoReconnect
	}
	if retryAfter <= 0 {
		return 0, nil
	}
	header := strconv.FormatInt(int64(retryAfter/time.Second), 10)
	d, _ := upstream.ParseRetryAfter(header, time.Time{})
	return d, nil
}
