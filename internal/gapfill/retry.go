package gapfill

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FetchRetry calls Fetch until it succeeds, fails in a way retrying cannot
// fix, or ctx ends. Before retry n (1 for the first retry) it waits
// backoff(n), or the answer's Retry-After when that is longer; when the
// wait would outlast ctx's deadline it gives up at once instead of
// sleeping to no purpose.
//
// Retried: HTTP 408, 429 and 5xx, network errors, an attempt that timed
// out, an unreadable or empty token file (a rotation may be under way).
// Not retried, returned as Fetch returned them: other statuses (404 first
// of all), an answer over MaxBytes or one that does not parse, a URL that
// does not parse, a certificate that does not verify. When ctx ends, the
// error says how many attempts were made and wraps the last failure that
// was not caused by ctx ending.
func (c *Client) FetchRetry(ctx context.Context, rawURL string, backoff func(attempt int) time.Duration) ([][]byte, error) {
	return retry(ctx, backoff, func() ([][]byte, error) { return c.Fetch(ctx, rawURL) })
}

// FetchDocumentRetry is FetchRetry for FetchDocument: one snapshot, with
// the same retries, waits and final failures.
func (c *Client) FetchDocumentRetry(ctx context.Context, rawURL string, backoff func(attempt int) time.Duration) ([]byte, error) {
	return retry(ctx, backoff, func() ([]byte, error) { return c.FetchDocument(ctx, rawURL) })
}

// retry calls get until it succeeds, fails for good or ctx ends
// (FetchRetry).
func retry[T any](ctx context.Context, backoff func(attempt int) time.Duration, get func() (T, error)) (T, error) {
	var zero T
	var last error
	for attempt := 1; ; attempt++ {
		v, err := get()
		switch {
		case err == nil:
			return v, nil
		case ctx.Err() != nil:
			if last == nil {
				last = err
			}
			return zero, giveUp(attempt, last)
		case !Transient(err):
			return zero, err
		}
		last = err
		if !wait(ctx, delayFor(err, backoff(attempt))) {
			return zero, giveUp(attempt, last)
		}
	}
}

func giveUp(attempts int, err error) error {
	return fmt.Errorf("gave up after %d attempts: %w", attempts, err)
}

// delayFor is the backoff delay, raised to the server's Retry-After.
func delayFor(err error, backoff time.Duration) time.Duration {
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > backoff {
		return se.RetryAfter
	}
	return backoff
}

// wait blocks for d and reports whether to try again: false when ctx ended
// or its deadline comes before d is over.
func wait(ctx context.Context, d time.Duration) bool {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Transient reports whether a Fetch error may go away by asking again.
func Transient(err error) bool {
	var (
		se       *StatusError
		tooLarge *TooLargeError
		parseErr *ParseError
		badURL   *badURLError
		cert     *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &se):
		return se.Status == http.StatusRequestTimeout || se.Status == http.StatusTooManyRequests || se.Status >= 500
	case errors.As(err, &tooLarge), errors.As(err, &parseErr), errors.As(err, &badURL), errors.As(err, &cert):
		return false
	case errors.Is(err, errAttemptTimeout):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller's context ended: asking again cannot succeed.
		return false
	}
	return true
}

// parseRetryAfter reads a Retry-After value (RFC 9110 section 10.2.3):
// delay-seconds or an HTTP-date, relative to now.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}

// maxRetryAfter caps what a server can ask for, so a bogus header cannot
// overflow a Duration; any gap timeout ends long before it.
const maxRetryAfter = 24 * time.Hour
