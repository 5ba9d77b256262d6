package transport

import "github.com/tetherproxy/tether/internal/labels"

// Why a message was not forwarded (the tether_app_dropped_total reasons)
// that the transports decide: a LineConn refuses an app's line over
// LineOptions.MaxLineBytes or not UTF-8 (LineError.Drop), does not send
// the bytes after an app's last newline (PartialLineError), and does not
// write an upstream message to the app under a drop or close policy
// (LineOptions.Dropped). The values are internal/labels', which the
// proxy's Metrics and internal/metrics use too.
const (
	DropTooLarge     = labels.DropTooLarge     // over TETHER_MAX_MESSAGE_BYTES
	DropInvalidUTF8  = labels.DropInvalidUTF8  // text that is not UTF-8
	DropUnterminated = labels.DropUnterminated // bytes a tcp:// app sent after its last newline before disconnecting
	DropBinary       = labels.DropBinary       // a binary upstream message, for a tcp:// app
	DropNewline      = labels.DropNewline      // an upstream text message holding CR or LF, for a tcp:// app
)
