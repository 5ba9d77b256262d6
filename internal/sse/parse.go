package sse

import (
	"bytes"
	"math"
	"time"
)

// process interprets one line (9.2.6): blank lines dispatch, lines starting
// with a colon are comments, anything else is a field. It reports whether
// the line produced an Item for the caller.
func (r *Reader) process(line []byte) (Item, bool, error) {
	if len(line) == 0 {
		it, ok := r.dispatch()
		return it, ok, nil
	}
	if line[0] == ':' {
		text := string(appendDecoded(nil, trimSpace(line[1:])))
		return Item{Kind: KindComment, Comment: text}, true, nil
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], trimSpace(line[i+1:])
	}
	return r.field(field, value)
}

// trimSpace removes the one U+0020 SPACE that may follow the colon; any
// further spaces belong to the value.
func trimSpace(v []byte) []byte {
	if len(v) > 0 && v[0] == ' ' {
		return v[1:]
	}
	return v
}

// field processes one field. Field names are compared as raw bytes: a name
// that is not valid UTF-8 decodes to text containing U+FFFD, which matches
// no known name either.
func (r *Reader) field(name, value []byte) (Item, bool, error) {
	switch string(name) {
	case "data":
		r.data = appendDecoded(r.data, value)
		r.data = append(r.data, '\n')
		if len(r.data) > r.max {
			return Item{}, false, &TooLargeError{Limit: r.max}
		}
	case "event":
		r.typ = appendDecoded(r.typ[:0], value)
	case "id":
		// A NUL byte can only decode to U+0000: no sequence swallows it.
		if bytes.IndexByte(value, 0) < 0 {
			r.id = appendDecoded(r.id[:0], value)
		}
	case "retry":
		d, ok := parseRetry(value)
		if !ok {
			return Item{}, false, nil
		}
		r.retry, r.hasRetry = d, true
		return Item{Kind: KindRetry, Retry: d}, true, nil
	}
	return Item{}, false, nil
}

// maxRetryMillis is the largest retry value a time.Duration can hold.
const maxRetryMillis = math.MaxInt64 / int64(time.Millisecond)

// parseRetry interprets a "retry" value: ASCII digits only, at least one,
// a base-ten number of milliseconds. The standard sets no upper bound;
// values too large for a time.Duration saturate rather than being ignored,
// since the server clearly asked for "a very long time".
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var ms int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		if ms <= maxRetryMillis {
			ms = ms*10 + int64(c-'0')
		}
	}
	if ms > maxRetryMillis {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// dispatch runs the standard's "dispatch the event" steps.
func (r *Reader) dispatch() (Item, bool) {
	// Step 1 comes before the empty-data check: an id-only block changes
	// the last event ID string. The buffer itself is not reset.
	changed := r.setLastID()
	if len(r.data) == 0 {
		r.typ = r.typ[:0]
		if changed {
			return Item{Kind: KindID, LastEventID: r.lastID}, true
		}
		return Item{}, false
	}
	ev := Event{
		Type: r.typeString(),
		// Every data line appended an LF; the last one is not data.
		Data: string(r.data[:len(r.data)-1]),
		ID:   r.lastID,
	}
	r.data, r.typ = reuse(r.data), r.typ[:0]
	return Item{Kind: KindEvent, Event: ev}, true
}

// keepCap is the largest buffer kept for reuse: one huge event must not
// pin MaxEventSize bytes for the rest of a long-lived stream.
const keepCap = 64 << 10

// reuse empties b, keeping its memory only if it is not oversized.
func reuse(b []byte) []byte {
	if cap(b) > keepCap {
		return nil
	}
	return b[:0]
}

// setLastID copies the last event ID buffer into the last event ID string,
// allocating only when it changed, and reports whether it did.
func (r *Reader) setLastID() bool {
	if string(r.id) == r.lastID {
		return false
	}
	r.lastID = string(r.id)
	return true
}

// typeString returns the event type, reusing the previous string when a
// stream keeps sending the same custom type.
func (r *Reader) typeString() string {
	if len(r.typ) == 0 {
		return DefaultType
	}
	if string(r.typ) != r.typeCache {
		r.typeCache = string(r.typ)
	}
	return r.typeCache
}
