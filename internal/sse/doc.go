// Package sse reads and writes the text/event-stream format of Server-Sent
// Events, as the HTML Living Standard defines it in "9.2.6 Interpreting an
// event stream". It owns the wire format only: no HTTP, no reconnection, no
// backoff. tether's upstream client feeds a response body to a [Reader] and
// uses what it reports (events, comments as liveness, retry values as a
// backoff floor, the last event ID for the Last-Event-ID header); its local
// endpoint writes events to EventSource clients with an [Encoder].
//
// # Parsing
//
// [Reader] follows the standard step by step:
//
//   - The bytes are decoded as UTF-8 the way the Encoding standard's decoder
//     does it: each maximal invalid subsequence becomes one U+FFFD, and one
//     leading byte order mark is removed, only at the very start of the
//     stream (a BOM split across reads is still recognised).
//   - Lines end at CRLF, at LF, or at a CR not followed by LF. A CR that ends
//     one Read and an LF that starts the next are one line end, not two.
//   - A line starting with a colon is a comment. The standard ignores it;
//     the Reader reports it ([KindComment]) because servers send comments as
//     heartbeats and tether uses them to tell a quiet stream from a dead one.
//   - Other lines split at the first colon into field and value, and one
//     space after the colon is removed; a line without a colon is a field
//     with an empty value. "data" appends the value and an LF to the data
//     buffer, "event" sets the event type buffer, "id" sets the last event
//     ID buffer unless the value contains U+0000, "retry" sets the
//     reconnection time if the value is ASCII digits only ([KindRetry]), and
//     any other field is ignored.
//   - An empty line dispatches. First the stream's last event ID string is
//     set from the last event ID buffer, which is not reset: so "id: 7" and a
//     blank line changes [Reader.LastEventID] although no event fires (the
//     Reader reports that as [KindID]). Then, if the data buffer is empty, the
//     data and type buffers are cleared and nothing else happens. Otherwise
//     the data's final LF is removed and an [Event] is returned, with type
//     "message" unless an "event" field named another, and with the last
//     event ID string as its ID (the ID persists across events that carry no
//     "id" field, as MessageEvent.lastEventId does).
//   - A stream that ends before the blank line that would dispatch its last
//     event discards that event, and an unterminated final line is not a
//     line at all.
//
// The standard initialises the last event ID buffer to the empty string for
// every stream it parses. Browsers carry the previous connection's value
// into the new stream's buffer instead (Chromium builds each connection's
// parser with the EventSource's last event ID). [Options.LastEventID] seeds
// both the buffer and the string, so a resumed stream whose events carry no
// "id" keeps the resume point; leave it empty for the literal behaviour.
//
// A hostile or broken server cannot make a Reader grow without bound:
// [Options.MaxEventSize] limits the length of a line and the data of one
// event, and exceeding it is a [*TooLargeError].
//
// # Writing
//
// [Encoder] writes events, comments, retry values and id-only blocks so
// that a standard parser reads back exactly the event written: data is
// split into one "data" line per line (at CRLF, LF or CR, so nothing can be
// misread as a field), and an "id" line is written whenever the client's
// last event ID string must change, including to the empty string.
//
// # Concurrency
//
// A Reader or an Encoder belongs to one goroutine at a time; neither starts
// goroutines. The package has no global state.
package sse
