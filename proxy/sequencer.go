package proxy

import (
	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/sequence"
)

// sequenced runs one upstream message through the session's Sequencer
// (internal/sequence); in is what the protocol read in it, hidden the hiding
// rules' verdict. Only the upstream reader calls it: the Sequencer keeps the
// delivery turn, and what it released may wait in the session's batch,
// until the reader's Flush.
func (sess *Session) sequenced(gen uint64, op ws.OpCode, data []byte, hidden bool, in protocol.Fields) {
	if !sess.waitApp() {
		return
	}
	sess.seq.Offer(gen, buffer.Message{Binary: op == ws.OpBinary, Data: data}, hidden, in)
}

// newSequencer gives the session its Sequencer (rules.seq.on).
func (sess *Session) newSequencer() *sequence.Sequencer {
	cfg := sess.srv.rules.seq.config
	// An sse:// app's events are named by what sequencing read in them.
	cfg.EventIDs = sess.kind == ListenerSSE
	opts := sequence.Options{
		Config:   cfg,
		App:      seqApp{sess},
		Classify: sess.classifyFetched,
		Log:      sess.log,
		Metrics:  &sess.tally, // the Server's Metrics, counted for Status too
	}
	if sess.acct != nil {
		// Held messages count on the session's account (a nil account
		// would be a non-nil Meter).
		opts.Meter = sess.acct
	}
	return sequence.New(sess.ctx, opts)
}

// classifyFetched reads a message a catch-up fetched as the upstream reader
// reads one: what the protocol says of it, the hiding rules' verdict (no
// connection carried it), and its sequence fields.
func (sess *Session) classifyFetched(data []byte) (sequence.Fields, bool) {
	u := sess.srv.rules.proto.Upstream(data)
	hidden := sess.hidden(nil, data, &u)
	return u.Seq, hidden
}

// seqApp is the session as its Sequencer's App: what the sequencing
// releases goes through the session's batch to the app socket (handler.go).
// The Sequencer calls it with its delivery turn held, which is what makes
// the batch the caller's.
type seqApp struct{ sess *Session }

// Deliver passes messages on to the app, until it is closing.
func (a seqApp) Deliver(msgs []buffer.SeqMessage) {
	for _, m := range msgs {
		op := ws.OpText
		if m.Binary {
			op = ws.OpBinary
		}
		if !a.sess.sendID(op, m.Data, m.EventID) {
			return
		}
	}
}

// Flush queues the session's batch on the app socket.
func (a seqApp) Flush() { a.sess.flushOut() }

// Close closes the app: the close gap policy gave a gap up.
func (a seqApp) Close(code int, reason string) { a.sess.closeApp(ws.StatusCode(code), reason) }
