package protocol

import (
	"time"

	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/rules"
	"github.com/tetherproxy/tether/internal/template"
)

// Rules are tether's TETHER_* message rules (docs/design.md "Restoring the
// application, not just the transport", "Outbox and acknowledgements",
// "Sequences and gap filling"), compiled: the "rules" protocol, which
// NewRules turns into a Protocol. Each field follows the TETHER_* variable
// of the same name; a nil Matcher or zero Path turns its rule off, and the
// zero Rules reads no message at all.
type Rules struct {
	// AuthMatch matches the app's login message: the latest one is sent
	// first on every reconnect. AuthOKMatch, when set, matches the
	// upstream's success reply, which the restore waits for before
	// sending anything else.
	AuthMatch   *rules.Matcher
	AuthOKMatch *rules.Matcher
	// SubscribeMatch and UnsubscribeMatch match the app messages kept in the
	// replay log; SubscriptionKey is the path of the value that tells
	// subscriptions apart, so an unsubscribe cancels its subscribe. A
	// message matching both patterns counts as an unsubscribe.
	SubscribeMatch   *rules.Matcher
	UnsubscribeMatch *rules.Matcher
	SubscriptionKey  rules.Path
	// ReplyIDPath is where requests and replies carry an id: a reply to a
	// request tether replayed, whose answer the app has already seen, is
	// hidden from the app.
	ReplyIDPath rules.Path
	// HideOnReconnectMatch matches upstream messages the app sees once (a
	// welcome): later ones are hidden.
	HideOnReconnectMatch *rules.Matcher
	// AckIDPath and AckMatch, both set, turn on acknowledged sends: an app
	// message with an id at AckIDPath is kept until an upstream message
	// matching AckMatch carries the same id there.
	AckIDPath rules.Path
	AckMatch  *rules.Matcher
	// ConfirmMatch matches the upstream message that confirms a connection
	// (Capabilities.Confirm); HeartbeatReplyMatch the replies to tether's
	// heartbeat probe, which are not forwarded (Capabilities.HeartbeatReply).
	ConfirmMatch        *rules.Matcher
	HeartbeatReplyMatch *rules.Matcher
	// SeqPath is where upstream messages carry their integer sequence
	// number (without it nothing is sequenced); StreamPath, when set,
	// names the stream each number belongs to.
	SeqPath    rules.Path
	StreamPath rules.Path
	// SeqFirstPath and SeqPrevPath are where a message carries the first
	// number it covers (Fields.First) and the number of the one before it
	// (Fields.Prev), for the range and chain sequence models.
	SeqFirstPath, SeqPrevPath rules.Path
	// SessionMatch and SessionPath capture the server's session id from the
	// upstream messages matching SessionMatch (Fields.Session).
	SessionMatch *rules.Matcher
	SessionPath  rules.Path
	// ResyncMatch matches a message that resets its stream to the number at
	// ResyncSeqPath (Fields.Resync).
	ResyncMatch   *rules.Matcher
	ResyncSeqPath rules.Path
	// EpochPath is where a message names the numbering its sequence number
	// belongs to (Fields.Epoch): a new value starts its stream over.
	EpochPath rules.Path

	// SubscriptionEndMatch matches an upstream message that ends the
	// subscription whose key it carries at SubscriptionKey (Upstream.Ends).
	SubscriptionEndMatch *rules.Matcher
	// AppPingMatch matches the app's keepalive, which tether answers with
	// AppPongMessage while no upstream connection is live; an upstream
	// message like AppPongMessage answers it (rulekeep.go).
	AppPingMatch   *rules.Matcher
	AppPongMessage []byte
	// AppKeepaliveMessage is sent to the app every AppKeepaliveInterval
	// while no upstream connection is live; both set, or neither.
	AppKeepaliveMessage  []byte
	AppKeepaliveInterval time.Duration
	// Framing splits several records out of one message (ndjson.go).
	Framing FramingMode
	// SubscribeReplay, when set, rewrites a keyed subscribe on replay from
	// the last number of its stream (rulereplay.go).
	SubscribeReplay template.SubscribeReplay
}

// ruleSet is the rules protocol: Rules with what each message direction
// needs precomputed, so that a direction no rule reads is never looked at,
// and one that some rule reads has its top level read once per message
// (ruleScan).
type ruleSet struct {
	Rules
	app      bool // some rule reads app messages
	upstream bool // some hiding rule reads upstream messages
	acks     bool // acknowledged sends are on
	seq      seqRules

	appScan                      ruleScan
	auth, subscribe, unsubscribe scanMatcher
	subKey, appReplyID, appAckID scanPath
	upScan                       ruleScan
	authOK, hideRepeat, ackMatch scanMatcher
	upReplyID, upAckID           scanPath
	endMatch, pongs              scanMatcher // SubscriptionEndMatch; AppPongMessage as a pattern
	upSubKey                     scanPath
	ping                         scanMatcher
	pong                         pongReader
}

// NewRules returns the rules protocol.
func NewRules(r Rules) Protocol { return newRuleSet(r) }

func newRuleSet(r Rules) *ruleSet {
	acks := isSet(r.AckIDPath) && r.AckMatch != nil
	rs := &ruleSet{
		Rules:    r,
		app:      r.AuthMatch != nil || r.SubscribeMatch != nil || r.UnsubscribeMatch != nil || acks || r.AppPingMatch != nil,
		upstream: r.AuthOKMatch != nil || r.HideOnReconnectMatch != nil || isSet(r.ReplyIDPath) || acks || r.ends() || r.AppPingMatch != nil,
		acks:     acks,
		seq:      newSeqRules(r),
		pong:     newPongReader(r.AppPongMessage),
	}
	if rs.app {
		// In the order App reads them: the first keys fill the scan.
		rs.auth, rs.unsubscribe = rs.appScan.matcher(r.AuthMatch), rs.appScan.matcher(r.UnsubscribeMatch)
		rs.subscribe = rs.appScan.matcher(r.SubscribeMatch)
		rs.appReplyID, rs.subKey = rs.appScan.path(r.ReplyIDPath), rs.appScan.path(r.SubscriptionKey)
		if acks {
			rs.appAckID = rs.appScan.path(r.AckIDPath)
		}
		rs.ping = rs.appScan.matcher(r.AppPingMatch)
	}
	if rs.upstream {
		rs.authOK, rs.hideRepeat = rs.upScan.matcher(r.AuthOKMatch), rs.upScan.matcher(r.HideOnReconnectMatch)
		rs.upReplyID = rs.upScan.path(r.ReplyIDPath)
		if acks {
			rs.ackMatch, rs.upAckID = rs.upScan.matcher(r.AckMatch), rs.upScan.path(r.AckIDPath)
		}
		if r.ends() {
			rs.endMatch = rs.upScan.matcher(r.SubscriptionEndMatch)
		}
		if r.ends() || r.HideOnReconnectMatch != nil {
			rs.upSubKey = rs.upScan.path(r.SubscriptionKey)
		}
		if r.AppPingMatch != nil {
			rs.pongs = rs.upScan.matcher(rs.pong.m)
		}
		rs.seq.fields.share(&rs.upScan)
	}
	return rs
}

func isSet(p rules.Path) bool { return p.String() != "" }

// ends reports whether the upstream can end a subscription: an end pattern
// and the key it carries.
func (r Rules) ends() bool { return r.SubscriptionEndMatch != nil && isSet(r.SubscriptionKey) }

// Capabilities: the rules read what their variables ask for; framing,
// keepalives and replay rewriting are on when their variables are set.
func (r *ruleSet) Capabilities() Capabilities {
	return Capabilities{
		Framing:        r.Framing.framer(),
		Keepalive:      r.keepalive(),
		Replay:         r.replayer(),
		ReadsApp:       r.app,
		ReadsUpstream:  r.upstream || r.seq.on,
		Sequences:      r.seq.on,
		Streams:        r.seq.on && isSet(r.StreamPath),
		Sessions:       r.seq.on && r.seq.capture,
		AwaitLogin:     r.AuthOKMatch != nil,
		Acks:           r.acks,
		Confirm:        matchFunc(r.ConfirmMatch),
		HeartbeatReply: matchFunc(r.HeartbeatReplyMatch),
	}
}

func matchFunc(m *rules.Matcher) func([]byte) bool {
	if m == nil {
		return nil
	}
	return m.Match
}

// App applies the app-side rules to one message. Without any, it returns
// at once.
func (r *ruleSet) App(data []byte) App {
	if !r.app {
		return App{}
	}
	var v ruleValues
	r.appScan.read(data, &v)
	var c App
	switch {
	case r.auth.match(data, &v):
		c.Kind = AppLogin
	case r.unsubscribe.match(data, &v):
		// Tested before subscribe: a regular expression such as
		// "re:subscribe" matches both, and the longer word is the intent.
		c.Kind = AppUnsubscribe
	case r.subscribe.match(data, &v):
		c.Kind = AppSubscribe
	case r.ping.match(data, &v):
		c.Kind = AppKeepalive
		return c
	case r.acks:
		c.AckID, _ = idOf(r.appAckID.get(data, &v))
		return c
	default:
		return c
	}
	c.ReplyID, _ = idOf(r.appReplyID.get(data, &v))
	if c.Kind != AppLogin && isSet(r.SubscriptionKey) {
		c.Key, c.Keyed = keyOf(r.subKey.get(data, &v))
	}
	return c
}

// Upstream applies the upstream-side rules to one message: the hiding
// rules and the sequence rules read its top level in one scan when their
// keys fit one (fieldReader.share). The result is filled in place: it is a
// large struct, and this runs for every upstream message.
func (r *ruleSet) Upstream(data []byte) (u Upstream) {
	var v ruleValues
	if r.upstream {
		r.upScan.read(data, &v)
		r.hidingIn(data, &v, &u)
	}
	if r.seq.on {
		r.seq.classifyIn(data, &v, &u.Seq)
	}
	return u
}

// hidingIn applies the hiding rules to a message whose top level was read
// into v by upScan.
func (r *ruleSet) hidingIn(data []byte, v *ruleValues, u *Upstream) {
	u.LoginOK = r.authOK.match(data, v)
	if u.Once = r.hideRepeat.match(data, v); u.Once {
		u.OnceKey, u.OnceKeyed = keyOf(r.upSubKey.get(data, v))
	}
	u.ReplyID, _ = idOf(r.upReplyID.get(data, v))
	if r.acks && r.ackMatch.match(data, v) {
		u.AckID, u.Ack = idOf(r.upAckID.get(data, v))
	}
	if r.endMatch.match(data, v) {
		u.EndKey, u.Ends = keyOf(r.upSubKey.get(data, v))
	}
	u.KeepaliveReply = r.AppPingMatch != nil && r.pong.answers(data, &r.pongs, v)
}

// idOf reads a message id: a JSON string or number (7 and "7" are the same
// id, since servers echo ids in either form). Anything else is no id.
func idOf(v fieldValue) (string, bool) {
	switch v.kind {
	case gjson.String:
		return v.str, true
	case gjson.Number:
		return v.raw, true
	}
	return "", false
}

// keyOf reads a subscription key: a string's value, or any other JSON
// value's text (Binance-style "params" arrays compare as written).
func keyOf(v fieldValue) (string, bool) {
	switch {
	case !v.ok:
		return "", false
	case v.kind == gjson.String:
		return v.str, true
	}
	return v.raw, true
}
