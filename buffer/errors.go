package buffer

import "errors"

// ErrOutboxFull is returned by [Outbox.Push] under [OverflowClose] when the
// message does not fit. Its text doubles as the WebSocket close reason the
// session sends with code 1013 (DESIGN.md "Outbox and acknowledgements").
var ErrOutboxFull = errors.New("outbox full")
