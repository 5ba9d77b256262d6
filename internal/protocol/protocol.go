package protocol

import (
	"strconv"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/sequence"
)

// Protocol is everything tether knows about the content of one application
// protocol's messages. A session consults it, and nothing else, to learn
// what a message is; what it does about it (the outbox, the restore order,
// sequencing) is the session's. A Protocol is shared by every session of a
// server: it is safe for concurrent use and keeps no per-session state
// (State does).
type Protocol interface {
	// Capabilities says once what the protocol does beyond classifying
	// messages, and which messages it reads at all: the session decides
	// from it up front, so a capability the protocol lacks costs nothing
	// per message.
	Capabilities() Capabilities
	// App classifies one app message (a protocol message: one piece of a
	// split WebSocket message when Capabilities.Framing is set). It is
	// called only when Capabilities.ReadsApp. The result owns its strings.
	App(data []byte) App
	// Upstream classifies one upstream message; only when
	// Capabilities.ReadsUpstream. ReplyID, AckID and EndKey are the
	// result's own; Seq.Stream and Seq.Session may point into data.
	Upstream(data []byte) Upstream
}

// Capabilities are what a protocol does besides classifying. The zero value
// is a protocol that reads nothing: every message is forwarded unread.
type Capabilities struct {
	// ReadsApp and ReadsUpstream say whether App and Upstream have anything
	// to say; without, the session does not call them.
	ReadsApp, ReadsUpstream bool
	// Sequences: upstream messages carry the sequence fields
	// (Upstream.Seq), and the session sequences them. Streams: Seq.Stream
	// names the stream of each number (a resume is sent per stream).
	// Sessions: some messages carry the server's session id
	// (Seq.Captured), without which there is nothing to resume.
	Sequences, Streams, Sessions bool
	// AwaitLogin: the upstream answers the app's login with a message
	// classified LoginOK, which a restore waits for before it sends the
	// subscriptions (the server would refuse them before).
	AwaitLogin bool
	// AwaitReplies: a restore waits for the reply to each subscription it
	// replayed with a ReplyID before it sends anything else (the
	// unacknowledged messages, the outbox), as it waits for the login's:
	// the replays' ids, which the app chose for earlier packets and may
	// use again, are then never in flight beside the app's own (MQTT
	// packet identifiers).
	AwaitReplies bool
	// Acks: app messages may carry an AckID, and upstream messages ack
	// them; the session keeps each such message until it is acknowledged.
	Acks bool
	// Confirm reports whether an upstream message proves the server is
	// serving (it confirms the connection and resets the backoff), and
	// HeartbeatReply whether it answers tether's heartbeat probe (it counts
	// as liveness and is not forwarded). The upstream reader asks them of
	// every WebSocket message, whole and before any framing, before the
	// session sees it; nil: no such message.
	Confirm, HeartbeatReply func(data []byte) bool
	// Framing, when set, returns a new Framer for one direction of one
	// connection: the app's messages are split (and joined) by the app
	// connection's, the upstream's by each upstream connection's. nil: one
	// WebSocket message is one protocol message.
	Framing func() Framer
	// Keepalive answers the app's keepalives, and keeps the app's side
	// alive, while no upstream connection is live. The zero value does
	// nothing: keepalives are queued like any other message.
	Keepalive Keepalive
	// Replay, when set, rewrites a logged subscription from the session's
	// current state each time a restore replays it (a resume point, say);
	// nil: replayed as the app sent it.
	Replay Replayer
	// Reply, when set, reads the upstream's reply to a logged subscription
	// (a Centrifugo subscribe reply), which does not name its stream: it is
	// called, after Upstream, with the subscription e it answers (found by
	// the reply id), own set when it answers tether's replay, whose reply
	// the app does not see. nil: a reply is only what Upstream says.
	Reply func(data []byte, e Entry, own bool) Answer
	// Resend, when set, rewrites a message waiting for its ack each time a
	// restore re-sends it on a new connection (an MQTT PUBLISH gets its
	// DUP flag); nil: re-sent as the app sent it. It returns data itself
	// or a new slice, never modifies data, and must not block.
	Resend func(data []byte) []byte
	// Abandoned returns the message the app gets, in place of the outcome,
	// for an App.AtMostOnce subscription that was in flight when its
	// connection was lost: the protocol's own error for that operation, so
	// the app's client library ends it rather than wait for ever. Required
	// when App can return AtMostOnce.
	Abandoned func(e Entry) Message
}

// AppKind is what an app message is to the restore.
type AppKind uint8

const (
	AppPlain       AppKind = iota // forwarded, or queued while down
	AppLogin                      // remembered, re-sent first on reconnect
	AppSubscribe                  // logged, replayed
	AppUnsubscribe                // logged (or cancels a subscribe), replayed
	AppKeepalive                  // the app's keepalive: answered by Keepalive.Answer while down
)

var appKindNames = [...]string{"plain", "login", "subscribe", "unsubscribe", "keepalive"}

// String returns the kind's name.
func (k AppKind) String() string {
	if int(k) < len(appKindNames) {
		return appKindNames[k]
	}
	return "AppKind(" + strconv.Itoa(int(k)) + ")"
}

// App is everything a protocol says about one app message.
type App struct {
	Kind AppKind
	// Key tells subscriptions apart, so an unsubscribe cancels its
	// subscribe; meaningful when Keyed (AppSubscribe, AppUnsubscribe).
	Key   string
	Keyed bool
	// ReplyID is the id the upstream's reply to this message carries
	// (AppLogin, AppSubscribe, AppUnsubscribe), "" when none: the reply to
	// a replay whose answer the app has seen is hidden.
	ReplyID string
	// AckID marks an acknowledged send (AppPlain with Capabilities.Acks):
	// kept and re-sent after a reconnect until an upstream message acks it.
	AckID string
	// AtMostOnce marks a keyed AppSubscribe that must not run twice (a
	// graphql-ws query or mutation): replayed only while it was never sent;
	// once sent on a connection that is lost before the server ended it,
	// it is forgotten and the app gets Capabilities.Abandoned for it.
	AtMostOnce bool
	// IfActive marks a keyed AppUnsubscribe that is sent only while its
	// subscription is active: one the server ended (Upstream.Ends), or that
	// was abandoned, is dropped, logged and counted (a graphql-ws complete
	// for an operation already completed).
	IfActive bool
	// DeliveryID, when set, names the upstream message this app message
	// settles (a STOMP ACK or NACK of a MESSAGE's ack header): it means
	// something only on the connection that delivered that message
	// (Upstream.DeliveryID), and is sent only there; one for a message of
	// a lost connection is dropped, logged and counted, never sent on
	// another, whose server would take it for a protocol error.
	DeliveryID string
}

// Restorable reports whether a restore re-sends the message itself, so it
// must not also wait in the outbox.
func (a App) Restorable() bool {
	return a.Kind == AppLogin || a.Kind == AppSubscribe || a.Kind == AppUnsubscribe
}

// Upstream is everything a protocol says about one upstream message.
type Upstream struct {
	LoginOK bool // answers the app's login (Capabilities.AwaitLogin)
	// Once: the app sees such a message once (a welcome): later ones are
	// hidden. With OnceKeyed, once per subscription OnceKey, and only as
	// the answer to tether's own replay of it (a subscription's ack): the
	// answer to one the app makes itself reaches it.
	Once      bool
	OnceKey   string
	OnceKeyed bool
	ReplyID   string // the request it answers, "" when none
	Ack       bool   // acknowledges the app message with AckID
	AckID     string
	// Ends: the upstream ended the subscription with EndKey (a server-side
	// "complete"): it is no longer replayed.
	Ends   bool
	EndKey string
	// KeepaliveReply: the upstream answered an app keepalive (a
	// graphql-ws pong). It still reaches the app; with Keepalive.Answer
	// set, the keepalive it answers is no longer answered by tether when
	// its connection is lost.
	KeepaliveReply bool
	// Ping: a keepalive of the upstream's that the app answers (a
	// Centrifugo server's ping). With Keepalive.OnlyAsked, the app's
	// keepalive goes to a connection only as the answer to one.
	Ping bool
	// DeliveryID is the id by which the app may settle this message on
	// its connection (App.DeliveryID), "" when none.
	DeliveryID string
	// Seq is what the sequence rules read (Capabilities.Sequences).
	Seq Fields
}

// Hides reports whether the message is of a kind that may be hidden from
// the app or changes what the session remembers, so State.Upstream must
// see it.
func (u Upstream) Hides() bool {
	return u.LoginOK || u.Once || u.ReplyID != "" || u.Ack || u.Ends || u.KeepaliveReply || u.Ping || u.DeliveryID != ""
}

// Fields are what the sequence rules read in one upstream message: the
// input of the session's Sequencer, defined (and documented field by
// field) where it is consumed, in internal/sequence.
type Fields = sequence.Fields

// Framer splits the WebSocket messages of one direction of one connection
// into protocol messages: several commands packed into one WebSocket
// message come out one by one, and a protocol message spanning WebSocket
// messages comes out once it is complete. It is used by one goroutine.
type Framer interface {
	// Split returns the protocol messages data, the next WebSocket message
	// of opcode op, completes, in order, each sent on (or delivered) as a
	// WebSocket message of that opcode. They point into data or into the
	// Framer's own buffer and are valid until the next call. An error says
	// the stream cannot be framed: the messages returned with it still go
	// on, the rest of data is dropped and counted; an app is then closed
	// with 1002, an upstream connection gets a new Framer.
	Split(op ws.OpCode, data []byte) ([][]byte, error)
}

// Message is a message tether writes on its own behalf.
type Message struct {
	Op   ws.OpCode
	Data []byte
}

// Keepalive is what keeps the app's side alive while no upstream
// connection is live (graphql-ws ping and pong, MQTT PINGREQ and PINGRESP,
// STOMP heart-beats, a server ping the app's client library expects).
type Keepalive struct {
	// Answer returns tether's reply to an app message of kind
	// AppKeepalive that arrives while no upstream connection is live; the
	// keepalive is then not queued. nil: the keepalive is queued like any
	// message. While a connection is live, keepalives go upstream; one
	// sent on a connection that is lost before the upstream answered it
	// (Upstream.KeepaliveReply) is answered with Answer then, as if it had
	// come a moment later: its answer will never come, and the app's
	// client library would count it as a dead connection.
	Answer func(data []byte) Message
	// Every, when positive, is how often the app gets Beat while no
	// upstream connection is live, as the upstream would have sent it.
	Every time.Duration
	Beat  Message
	// Negotiate, when set, returns how often one session's app gets Beat,
	// read from the app's login and the upstream's answer to it (the
	// message classified LoginOK), for a protocol whose beats are agreed
	// per connection (STOMP's heart-beat headers). It replaces Every for
	// that session from each such answer on; 0 stops the beats. It does no
	// I/O and must not block.
	Negotiate func(login, answer []byte) time.Duration
	// Idle sends Beat whenever the app has had nothing from tether for
	// the interval, a connection live or not, instead of only while none
	// is: for a protocol in which any byte is a beat and a server may skip
	// its own beats while other bytes go out on its socket (RabbitMQ
	// counts its WebSocket pongs to tether's pings, which the app never
	// sees).
	Idle bool
	// DropWhileDown: with Answer nil, an app keepalive that arrives while
	// no upstream connection is live is dropped (logged, counted
	// "keepalive"), not queued: it answers a Beat, and the server it would
	// reach on the next connection never asked for it (a Centrifugo server
	// disconnects a client for a pong it did not ping for).
	DropWhileDown bool
	// OnlyAsked: the app's keepalive answers the upstream's ping
	// (Upstream.Ping), and goes to the live connection only when that
	// connection has pinged since the app's last answer; otherwise it is
	// dropped, as while down. The app answers a ping of a lost connection,
	// or tether's Beat, when it gets to it, and on a loaded machine that is
	// after the next connection is live, whose server never asked: a
	// Centrifugo server closes such a connection with 3501 bad request,
	// which ends the app's session.
	OnlyAsked bool
}

// Replayer rewrites a logged subscription each time a restore replays it.
type Replayer interface {
	// Replay returns the message to send for e, read with what the session
	// knows now (cur, a copy taken once per restore). An error sends e as
	// the app sent it, and is logged. It runs in the restore and must not
	// block.
	Replay(e Entry, cur Current) ([]byte, error)
}

// Entry is a logged subscription as a Replayer sees it.
type Entry struct {
	Message []byte // as the app sent it, or as Answer.Log rewrote it; must not be modified
	Key     string // meaningful when Keyed
	Keyed   bool
	Op      AppKind // AppSubscribe or AppUnsubscribe
}

// Answer is what a reply to a logged subscription means besides itself
// (Capabilities.Reply).
type Answer struct {
	// Seq is the reply's own sequence fields (a subscribe reply's position
	// in its stream, a Resync), in place of Upstream.Seq.
	Seq Fields
	// Messages are protocol messages the app gets after the reply, each
	// classified (Upstream) and sequenced like any upstream message: the
	// publications a recovering subscribe reply carries, as the pushes of
	// its stream, when the reply itself is hidden.
	Messages [][]byte
	// Upstream are messages tether sends on the reply's connection on its
	// own behalf, after Messages are delivered (an unsubscribe, so that the
	// app can subscribe again). Their replies reach the app, which must
	// ignore them: they carry ids it never used.
	Upstream [][]byte
	// Log, when set, replaces the message of the logged subscription, so a
	// later Replay reads what the reply said (a stream's epoch).
	Log []byte
	// End: the subscription leaves the log, as for Upstream.Ends.
	End bool
}

// Current is what a session knows now, for a Replayer.
type Current interface {
	// LastSeq is the number of the last message of stream delivered to the
	// app, when the session sequences and has seen one.
	LastSeq(stream string) (int64, bool)
	// Session is the server's session id captured last, "" when none.
	Session() string
	// Epoch is the numbering of stream's numbers (Fields.Epoch), "" when
	// none was seen.
	Epoch(stream string) string
}
