package upstream

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Default close-code lists (docs/design.md "Close codes"). The permanent codes are
// the ones RFC 6455 §7.4.1 defines for a peer that will reject the same
// traffic again: protocol error, unacceptable data type, invalid payload,
// policy violation, message too big, missing extension. The reauth codes are
// the conventional application codes for "unauthorized" and "forbidden"
// (4000-4999 are private use, §7.4.2).
const (
	DefaultPermanentCodes = "1002,1003,1007,1008,1009,1010"
	DefaultReauthCodes    = "4001,4003"
)

// Close codes with a server-requested minimum delay (RFC 6455 §7.4.1 as
// extended by the IANA registry).
const (
	codeServiceRestart = 1012
	codeTryAgainLater  = 1013
)

// Range of close codes an operator may list: 1000-2999 are defined by the
// protocol and its extensions, 3000-4999 by libraries and applications.
const (
	minCloseCode = 1000
	maxCloseCode = 4999
)

// CodeSet is an immutable set of WebSocket close codes, parsed from a list
// such as "1002,1007-1010,4500-4999". It is stored as sorted, merged ranges,
// so a "3000-4999" list costs one element. The zero value is the empty set.
// A CodeSet is safe for concurrent reads.
type CodeSet struct {
	ranges []codeRange
}

type codeRange struct{ lo, hi int }

// ParseCodeSet parses a comma-separated list of close codes and inclusive
// ranges. Spaces around elements are ignored; an empty or blank string is the
// empty set. 1005, 1006 and 1015 are refused on their own: no close frame
// carries them. Each error names the element at fault, so that the caller only
// has to prefix the variable name.
func ParseCodeSet(s string) (CodeSet, error) {
	if strings.TrimSpace(s) == "" {
		return CodeSet{}, nil
	}
	var rs []codeRange
	for i, el := range strings.Split(s, ",") {
		r, err := parseCodeRange(strings.TrimSpace(el), i+1)
		if err != nil {
			return CodeSet{}, err
		}
		rs = append(rs, r)
	}
	return CodeSet{ranges: mergeRanges(rs)}, nil
}

// parseCodeRange parses "1002" or "1007-1010"; pos is the 1-based element
// position, reported when the element is empty and has nothing else to show.
func parseCodeRange(el string, pos int) (codeRange, error) {
	if el == "" {
		return codeRange{}, fmt.Errorf("empty element at position %d", pos)
	}
	loText, hiText, isRange := strings.Cut(el, "-")
	if !isRange {
		code, err := parseCloseCode(el)
		if err == nil {
			err = checkArrives(code)
		}
		return codeRange{code, code}, err
	}
	lo, err := parseCloseCode(strings.TrimSpace(loText))
	if err != nil {
		return codeRange{}, fmt.Errorf("range %q: %w", el, err)
	}
	hi, err := parseCloseCode(strings.TrimSpace(hiText))
	if err != nil {
		return codeRange{}, fmt.Errorf("range %q: %w", el, err)
	}
	if lo > hi {
		return codeRange{}, fmt.Errorf("range %q is reversed", el)
	}
	return codeRange{lo, hi}, nil
}

// parseCloseCode accepts digits only: strconv.Atoi alone would also take
// "+1002", which nobody means.
func parseCloseCode(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q: not a close code", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < minCloseCode || n > maxCloseCode {
		return 0, fmt.Errorf("%q: close code out of range %d-%d", s, minCloseCode, maxCloseCode)
	}
	return n, nil
}

// neverSent are the codes RFC 6455 §7.4.1 forbids in a close frame, with
// what each stands for. Listed alone they could only be a mistake (a range
// may span them).
var neverSent = map[int]string{
	1005: "a close frame without a code",
	1006: "a connection that ended without one",
	1015: "a failed TLS handshake",
}

// checkArrives refuses a code no upstream sends in a close frame.
func checkArrives(code int) error {
	if what, ok := neverSent[code]; ok {
		return fmt.Errorf("%q: never sent in a close frame (RFC 6455 §7.4.1 reserves it for %s)", strconv.Itoa(code), what)
	}
	return nil
}

// mergeRanges sorts ranges and joins overlapping or adjacent ones, so that
// Contains is one binary search and String prints a canonical list.
func mergeRanges(rs []codeRange) []codeRange {
	slices.SortFunc(rs, func(a, b codeRange) int { return a.lo - b.lo })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// Contains reports whether code is in the set.
func (c CodeSet) Contains(code int) bool {
	i, _ := slices.BinarySearchFunc(c.ranges, code, func(r codeRange, code int) int {
		if r.hi < code {
			return -1
		}
		return 0
	})
	return i < len(c.ranges) && c.ranges[i].lo <= code
}

// Without returns the codes of c that are not in other.
func (c CodeSet) Without(other CodeSet) CodeSet {
	var out []codeRange
	for _, r := range c.ranges {
		lo := r.lo
		for _, o := range other.ranges { // sorted and merged: one pass
			if o.hi < lo || o.lo > r.hi {
				continue
			}
			if o.lo > lo {
				out = append(out, codeRange{lo, o.lo - 1})
			}
			lo = o.hi + 1
		}
		if lo <= r.hi {
			out = append(out, codeRange{lo, r.hi})
		}
	}
	return CodeSet{ranges: out}
}

// String returns the canonical list: sorted, merged, ranges written lo-hi.
// ParseCodeSet(c.String()) yields an equal set.
func (c CodeSet) String() string {
	parts := make([]string, len(c.ranges))
	for i, r := range c.ranges {
		parts[i] = strconv.Itoa(r.lo)
		if r.hi != r.lo {
			parts[i] += "-" + strconv.Itoa(r.hi)
		}
	}
	return strings.Join(parts, ",")
}

// UnmarshalText lets configuration decoders (caarlos0/env) parse a CodeSet.
func (c *CodeSet) UnmarshalText(b []byte) error {
	v, err := ParseCodeSet(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Action is what the client does after a connection ends or a dial fails.
type Action int

const (
	// ActionReconnect: back off, then dial again with the same credentials.
	ActionReconnect Action = iota
	// ActionReauth: re-read credentials (the token file), then reconnect.
	ActionReauth
	// ActionStop: permanent; stop dialing and tell the owner.
	ActionStop
)

var actionNames = [...]string{
	ActionReconnect: "reconnect",
	ActionReauth:    "reauth",
	ActionStop:      "stop",
}

// String returns the lowercase name used in logs.
func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// ClosePolicy classifies close codes received from the upstream. It is a
// plain value, safe for concurrent use.
type ClosePolicy struct {
	// Permanent codes stop the client (TETHER_PERMANENT_CODES).
	Permanent CodeSet
	// Reauth codes re-read credentials before reconnecting
	// (TETHER_REAUTH_CODES).
	Reauth CodeSet
	// RestartFloor is the minimum delay after 1012 Service Restart
	// (TETHER_RESTART_FLOOR): reconnecting sooner would hit the server while
	// it is still down.
	RestartFloor time.Duration
	// TryAgainFloor is the minimum delay after 1013 Try Again Later
	// (TETHER_TRY_AGAIN_FLOOR): the server is overloaded.
	TryAgainFloor time.Duration
}

// Classify returns what to do after the upstream closed with code, and the
// minimum delay before the next dial (0 when the server asked for none).
//
// The configured sets are checked first, so an operator can turn any code,
// 1012 and 1013 included, into stop or reauth. Everything else reconnects:
// 1000 and 1001 (a server closing or going away is routine churn), 1006
// (abnormal closure, no close frame), 1011, 1012, 1013, 1014, and any code
// we do not know, because giving up on an unknown code would turn a server's
// harmless new code into an outage.
func (p ClosePolicy) Classify(code int) (a Action, floor time.Duration) {
	switch {
	case p.Permanent.Contains(code):
		return ActionStop, 0
	case p.Reauth.Contains(code):
		return ActionReauth, 0
	case code == codeServiceRestart:
		return ActionReconnect, p.RestartFloor
	case code == codeTryAgainLater:
		return ActionReconnect, p.TryAgainFloor
	default:
		return ActionReconnect, 0
	}
}

// StatusClass classifies an HTTP status answered to the upstream handshake.
type StatusClass int

const (
	// StatusTransient: retry with backoff.
	StatusTransient StatusClass = iota
	// StatusAuth: re-read credentials, retry with backoff, give up after
	// TETHER_AUTH_FAILURES_MAX consecutive ones.
	StatusAuth
	// StatusPermanent: retrying the same request cannot succeed.
	StatusPermanent
)

var statusClassNames = [...]string{
	StatusTransient: "transient",
	StatusAuth:      "auth",
	StatusPermanent: "permanent",
}

// String returns the lowercase name used in logs and metric labels.
func (s StatusClass) String() string {
	if s >= 0 && int(s) < len(statusClassNames) {
		return statusClassNames[s]
	}
	return "StatusClass(" + strconv.Itoa(int(s)) + ")"
}

// ClassifyStatus classifies the HTTP status of a refused handshake.
//
// 401 and 403 are auth failures. Exactly 400, 404, 405 and 410 are permanent
// (docs/design.md): a malformed request, a wrong path, a wrong method or a removed
// endpoint will not fix themselves. Every other status is transient: 408,
// 429 and 5xx are temporary by definition, and the remaining 4xx (409
// Conflict, 425 Too Early, 423 Locked, ...) as well as unexpected 1xx-3xx
// answers (a proxy's maintenance redirect, a load balancer's 200 page) are
// too often temporary to justify abandoning the app's connection; backoff
// keeps retrying them cheap.
func ClassifyStatus(code int) StatusClass {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return StatusAuth
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusGone:
		return StatusPermanent
	default:
		return StatusTransient
	}
}

// MaxRetryAfter bounds a Retry-After value. A server (or a misconfigured
// proxy) asking for a day would otherwise park every session silently; an
// hour is long enough to honour any real maintenance window advice while
// staying visible in the logs as a reconnect attempt.
const MaxRetryAfter = time.Hour

// ParseRetryAfter parses an HTTP Retry-After value (RFC 9110 §10.2.3): either
// delay-seconds (digits only) or an HTTP-date, taken relative to now.
//
// It returns 0, false when the value is absent or invalid, including a
// negative or fractional number of seconds, which the grammar does not
// allow. A date in the past is valid and means "now": 0, true. Values above
// MaxRetryAfter, including numbers too large for an int64, return
// MaxRetryAfter.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		return retryAfterSeconds(v), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter), true
}

// retryAfterSeconds converts a string of digits; overflow means "huge".
func retryAfterSeconds(digits string) time.Duration {
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > int64(MaxRetryAfter/time.Second) {
		return MaxRetryAfter
	}
	return time.Duration(n) * time.Second
}
