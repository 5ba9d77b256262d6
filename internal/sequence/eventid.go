package sequence

import (
	"strconv"
	"strings"
)

// Event ids of sequenced messages (Config.EventIDs). An sse:// app's event
// made of a numbered message is named "<stream>:<seq>", or "<seq>" alone
// for the unnamed stream: the upstream's own position, readable, and the
// same across tether's upstream reconnects and sessions, unlike a token. A
// stream name that an event id cannot carry (a line break, a NUL) gives no
// name: the event keeps tether's token id.

// EventID is the event id of the message numbered seq in stream, "" when
// the stream's name cannot be part of one.
func EventID(stream string, seq int64) string {
	if strings.ContainsAny(stream, "\r\n\x00") {
		return ""
	}
	n := strconv.FormatInt(seq, 10)
	if stream == "" {
		return n
	}
	return stream + ":" + n
}

// ParseEventID reads an id EventID wrote: the stream is what comes before
// the last ':' ("" when there is none), and seq the integer after it.
func ParseEventID(id string) (stream string, seq int64, ok bool) {
	num := id
	if i := strings.LastIndexByte(id, ':'); i >= 0 {
		stream, num = id[:i], id[i+1:]
		if stream == "" {
			return "", 0, false // EventID names the unnamed stream's messages by their number alone
		}
	}
	if num == "" || num[0] == '+' || strings.ContainsAny(stream, "\r\n\x00") {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return stream, seq, true
}
