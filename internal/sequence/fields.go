package sequence

// Fields are what sequencing reads in one upstream message (docs/design.md
// "Sequences and gap filling"). The session's message classification fills
// them, reading every configured path in one pass; the Sequencer never looks
// inside a message itself. Stream and Session may point into the message:
// they are valid as long as the message is, and the Sequencer copies what it
// keeps.
type Fields struct {
	// Seq is the message's integer at TETHER_SEQ_PATH; HasSeq reports that
	// it carries one. A message without a number is not sequenced: it
	// passes through.
	Seq    int64
	HasSeq bool
	// First is the first number the message covers, at
	// TETHER_SEQ_FIRST_PATH (TETHER_SEQ_MODEL=range: Binance's U); Prev
	// the number of the message before it, at TETHER_SEQ_PREV_PATH
	// (chain: Deribit's prev_change_id). HasFirst and HasPrev report that
	// the message carries one. Each is read under its model only.
	First, Prev       int64
	HasFirst, HasPrev bool
	// Stream is the value at TETHER_STREAM_PATH, the stream Seq belongs to;
	// "" is the unnamed stream (no value there, or the path unset).
	Stream string
	// Session is the server's session id at TETHER_SESSION_PATH; Captured
	// reports that the message matches TETHER_SESSION_MATCH and carries
	// one. The latest captured id is what a resume and a catch-up ask for.
	Session  string
	Captured bool
	// ResyncSeq is the number at TETHER_RESYNC_SEQ_PATH; Resync reports
	// that the message matches TETHER_RESYNC_MATCH and carries one: a
	// snapshot that resets Stream to ResyncSeq, never taken for a
	// duplicate.
	ResyncSeq int64
	Resync    bool
	// Epoch is the value at TETHER_EPOCH_PATH ("" when unset or absent):
	// the numbering Seq belongs to. A numbered message whose Epoch differs
	// from the one its stream had starts the stream over at Seq (a broker
	// restart): the reset is logged, counted and given to
	// TETHER_GAP_POLICY. It may point into the message, like Stream.
	Epoch string
	// EventID is the upstream's own name for the message, read by the
	// session rather than the rules: an SSE upstream's event id. It is
	// delivered with the message (buffer.SeqMessage.EventID), before any
	// name Config.EventIDs would give it. It must not point into the
	// message: a held message keeps it.
	EventID string
}
