package sse

import (
	"fmt"
	"time"
)

// DefaultType is the type of an event whose stream named none.
const DefaultType = "message"

// Event is one dispatched event.
type Event struct {
	// Type is the event type: DefaultType unless an "event" field named
	// another. When encoding, "" means DefaultType.
	Type string
	// Data is the event's data: the values of its "data" lines joined by
	// LF. It may be empty (a block with a bare "data" line).
	Data string
	// ID is the stream's last event ID string when the event was
	// dispatched: set by the latest "id" field, in this block or an
	// earlier one, and "" if none (or an empty "id" reset it). It is what
	// MessageEvent.lastEventId holds and what a reconnecting client sends
	// as Last-Event-ID.
	ID string
}

// Kind says what an Item reports.
type Kind uint8

// The kinds of Item, in no particular order.
const (
	// KindEvent is a dispatched event, in Item.Event.
	KindEvent Kind = iota + 1
	// KindComment is a comment line, its text in Item.Comment.
	KindComment
	// KindRetry is a valid "retry" field, its value in Item.Retry.
	KindRetry
	// KindID is a blank line that dispatched no event (its block had no
	// data) but changed the stream's last event ID string, now in
	// Item.LastEventID.
	KindID
)

func (k Kind) String() string {
	switch k {
	case KindEvent:
		return "event"
	case KindComment:
		return "comment"
	case KindRetry:
		return "retry"
	case KindID:
		return "id"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Item is one thing a Reader reports. Only the field its Kind names is set.
type Item struct {
	Kind  Kind
	Event Event
	// Comment is the text after the colon, without the one space that may
	// follow it (like a field value).
	Comment string
	// Retry is the reconnection time the server asked for. Values beyond
	// what a time.Duration holds (about 292 years) saturate.
	Retry time.Duration
	// LastEventID is the stream's new last event ID string.
	LastEventID string
}
