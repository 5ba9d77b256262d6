// Package gapfill is tether's HTTP catch-up client (TETHER_GAPFILL_URL,
// docs/design.md "Sequences and gap filling"): it GETs the messages of a gap
// from the upstream's HTTP endpoint, with the same credentials as the
// upstream WebSocket (static headers, and a bearer token re-read from its
// file on every request, so a rotated token is picked up), and returns them
// as raw messages for the session to merge through its sequence tracker.
// It goes through the upstream's HTTP proxy (Options.Proxy), which says so
// when it refuses: a 407, or its answer to the CONNECT of an https:// URL.
//
// The answer is a JSON array of messages or NDJSON (one message per line,
// "\n" or "\r\n", blank lines skipped); see [Parse] for how the two are
// told apart. Every request is bounded in time (Options.Timeout, from
// connecting to the last byte) and size (Options.MaxBytes), and every
// failure says what went wrong: the HTTP status and Retry-After, the limit
// that was exceeded, or the element or line that is not JSON. Errors never
// quote the URL or the headers, which may carry credentials.
//
// The same client fetches the snapshots of TETHER_RESYNC_URL:
// [Client.FetchDocument] reads an answer that is one JSON value (a REST
// order-book snapshot), with the same credentials, limits and errors, and
// [Client.FetchDocumentRetry] retries it as FetchRetry does.
//
// [Client.Fetch] makes one request; [Client.FetchRetry] retries transient
// failures (HTTP 408, 429 and 5xx, network errors, timeouts) with the
// caller's backoff until its context ends, which is how TETHER_GAP_TIMEOUT
// bounds the whole catch-up. A 404 or another 4xx, an oversized answer or
// an answer that does not parse is final: asking again cannot fix it.
//
// A partial answer (fewer messages than the gap) is returned as it is: the
// tracker fills what it can, and the gap policy handles the rest.
//
// Concurrency: a Client is safe for concurrent use by any number of
// sessions. Each call runs in the caller's goroutine; the only goroutines
// are net/http's, for the connections kept for reuse, which Close ends.
package gapfill
