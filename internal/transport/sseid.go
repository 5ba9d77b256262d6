package transport

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/gobwas/ws"
	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/sse"
)

// Event ids of an sse:// listener. An event the session has a name for
// carries it (SSEApp.AppendID: an SSE upstream's own id, or with
// sequencing "<stream>:<seq>"); every other event tether writes to an
// EventSource app carries the id "<token>-<n>": token names the session
// (26 characters of crypto/rand base32, 128 bits, so no other local client
// can guess it and attach to a stream that is not its own), n counts the
// session's events from 1, named ones included. An EventSource sends the
// last id it saw as Last-Event-ID when it reconnects, which is all tether
// needs to resume the session after it: a token names it, and a name is
// looked up in the sessions' logs (SSEApp.HoldsID).

// Bounds on the length of a token in an id tether reads back.
// crypto/rand.Text returns 26 characters today and "may return longer
// texts" in later Go versions; a token outside these bounds is no token.
const (
	minTokenLen = 26
	maxTokenLen = 64
)

// newSSEToken returns a fresh, unguessable session token.
func newSSEToken() string { return rand.Text() }

// eventID is "<token>-<n>".
func eventID(token string, n uint64) string {
	return token + "-" + strconv.FormatUint(n, 10)
}

// appendIDLine appends the "id" line of event n of a session.
func appendIDLine(dst []byte, token string, n uint64) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, token...)
	dst = append(dst, '-')
	dst = strconv.AppendUint(dst, n, 10)
	return append(dst, '\n')
}

// ParseEventID splits a Last-Event-ID into token and n; ok is false for an
// id tether did not write.
func ParseEventID(id string) (token string, n uint64, ok bool) {
	token, num, found := strings.Cut(id, "-")
	if !found || len(token) < minTokenLen || len(token) > maxTokenLen || !isToken(token) || num == "" || num[0] == '+' {
		return "", 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return token, n, true
}

// isToken reports whether s is made of crypto/rand.Text's alphabet
// (RFC 4648 base32: A-Z, 2-7).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// The named events tether writes itself. Neither is kept for replay.
const (
	// sseGapEvent tells the app that the stream it resumes is not the one it
	// left: events were lost, and tether says so rather than pretend.
	sseGapEvent = "tether-gap"
	// sseCloseEvent is the last event of a stream tether ends itself, with
	// the close code and reason a WebSocket app would get.
	sseCloseEvent = "tether-close"
)

// Why a gap notice was sent (its reason field): the gap argument of
// SSEApp.Attach.
const (
	// GapSessionGone: the Last-Event-ID is a tether id, but its session no
	// longer exists here (the app stayed away longer than TETHER_SSE_LINGER,
	// tether restarted, or it never existed). A new session starts.
	GapSessionGone = labels.SSESessionGone
	// GapEvicted: the session exists, but the events right after the
	// Last-Event-ID were dropped from its bounded buffer. The stream
	// resumes at the oldest event kept; lost says how many are missing.
	GapEvicted = labels.SSEEvicted
	// GapForeignID: the Last-Event-ID is not a tether id (the app talked to
	// another server before), and the upstream cannot resume from it. A new
	// session starts.
	GapForeignID = labels.SSEForeignID
)

// gapNotice is the data of a tether-gap event.
type gapNotice struct {
	Reason string `json:"reason"`
	Lost   uint64 `json:"lost,omitempty"`
}

// closeNotice is the data of a tether-close event.
type closeNotice struct {
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}

// appendNotice appends one of tether's named events. With id set it also
// carries the id the app resumes from if it reconnects after it, so the
// notice is not repeated.
func appendNotice(dst []byte, typ string, data any, id string, withID bool) []byte {
	b, err := json.Marshal(data)
	if err != nil {
		// Both notice types are plain structs of strings and integers.
		panic(err)
	}
	out, err := sse.AppendEvent(dst, sse.Event{Type: typ, Data: string(b), ID: id}, withID)
	if err != nil {
		// typ is a constant and id a token and a number: neither has a
		// line break or a NUL.
		panic(err)
	}
	return out
}

// eventIDWritable reports whether an event may carry id as its own: an id
// with a NUL is ignored by an EventSource (HTML §9.2.6), and one with a
// line break cannot be written.
func eventIDWritable(id string) bool { return !strings.ContainsAny(id, "\r\n\x00") }

// sseEventOf turns one upstream message into the event an sse:// app gets.
// From an SSE upstream delivering {"id","event","data"} objects (json is
// true), the upstream event's id, type and data are re-emitted: the app sees
// what the server sent, its id included (tether's own only when the server
// gave none, or one an EventSource would ignore). Any
// other message becomes a "message" event whose data is the text, or for a
// binary message its standard base64 (RFC 4648 §4): EventSource carries
// text only, and base64 loses nothing.
func sseEventOf(op ws.OpCode, p []byte, json bool) sse.Event {
	if op == ws.OpBinary {
		return sse.Event{Data: base64.StdEncoding.EncodeToString(p)}
	}
	if json {
		if r := gjson.GetManyBytes(p, "event", "data", "id"); r[1].Exists() {
			ev := sse.Event{Type: r[0].String(), Data: r[1].String()}
			if id := r[2].String(); eventIDWritable(id) {
				ev.ID = id
			}
			if !strings.ContainsAny(ev.Type, "\r\n") {
				return ev
			}
		}
	}
	return sse.Event{Data: string(p)}
}
