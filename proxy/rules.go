package proxy

import (
	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/rules"
)

// Rules are the message rules that restore the application on every new
// upstream connection (DESIGN.md "Restoring the application, not just the
// transport" and "Outbox and acknowledgements"), compiled. Each field follows
// the TETHER_* variable of the same name; a nil Matcher or zero Path turns
// its rule off, and the zero Rules turns them all off.
type Rules struct {
	// AuthMatch matches the app's login message: the latest one is sent
	// first on every reconnect. AuthOKMatch, when set, matches the
	// upstream's success reply, which the restore waits for (at most the
	// upstream DialTimeout) before sending anything else.
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
	// matching AckMatch carries the same id there, and re-sent after a
	// reconnect until then.
	AckIDPath rules.Path
	AckMatch  *rules.Matcher
	// Sequences number upstream messages, resume streams on reconnect and
	// fill gaps (sequence.go).
	Sequences Sequences
}

// ruleSet is a Server's Rules with what each message direction needs
// precomputed, so a session with no rules configured never looks at a
// message's content, and one with rules reads each message's top level once
// per direction (ruleScan).
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
}

func newRuleSet(r Rules) ruleSet {
	acks := isSet(r.AckIDPath) && r.AckMatch != nil
	rs := ruleSet{
		Rules:    r,
		app:      r.AuthMatch != nil || r.SubscribeMatch != nil || r.UnsubscribeMatch != nil || acks,
		upstream: r.AuthOKMatch != nil || r.HideOnReconnectMatch != nil || isSet(r.ReplyIDPath) || acks,
		acks:     acks,
		seq:      newSeqRules(r.Sequences),
	}
	if rs.app {
		// In the order classifyApp reads them: the first keys fill the scan.
		rs.auth, rs.unsubscribe = rs.appScan.matcher(r.AuthMatch), rs.appScan.matcher(r.UnsubscribeMatch)
		rs.subscribe = rs.appScan.matcher(r.SubscribeMatch)
		rs.appReplyID, rs.subKey = rs.appScan.path(r.ReplyIDPath), rs.appScan.path(r.SubscriptionKey)
		if acks {
			rs.appAckID = rs.appScan.path(r.AckIDPath)
		}
	}
	if rs.upstream {
		rs.authOK, rs.hideRepeat = rs.upScan.matcher(r.AuthOKMatch), rs.upScan.matcher(r.HideOnReconnectMatch)
		rs.upReplyID = rs.upScan.path(r.ReplyIDPath)
		if acks {
			rs.ackMatch, rs.upAckID = rs.upScan.matcher(r.AckMatch), rs.upScan.path(r.AckIDPath)
		}
		rs.seq.fields.share(&rs.upScan)
	}
	return rs
}

func isSet(p rules.Path) bool { return p.String() != "" }

// appKind is what an app message is to the restore.
type appKind uint8

const (
	appPlain       appKind = iota // forwarded, or queued while down
	appAuth                       // remembered, re-sent first on reconnect
	appSubscribe                  // logged, replayed
	appUnsubscribe                // logged (or cancels a subscribe), replayed
)

// appClass is everything the rules say about one app message, decided in
// one pass when it arrives.
type appClass struct {
	kind    appKind
	key     string // subscription key value, when keyed
	keyed   bool
	replyID string // request id, for auth and (un)subscribe messages
	ackID   string // acknowledgement id, for plain messages with acks on
}

// restorable reports whether a restore re-sends the message itself, so it
// must not also wait in the outbox.
func (c appClass) restorable() bool { return c.kind != appPlain }

// classifyApp applies the app-side rules to one message. Without any, it
// returns at once.
func (r *ruleSet) classifyApp(data []byte) appClass {
	if !r.app {
		return appClass{}
	}
	var v ruleValues
	r.appScan.read(data, &v)
	var c appClass
	switch {
	case r.auth.match(data, &v):
		c.kind = appAuth
	case r.unsubscribe.match(data, &v):
		// Tested before subscribe: a regular expression such as
		// "re:subscribe" matches both, and the longer word is the intent.
		c.kind = appUnsubscribe
	case r.subscribe.match(data, &v):
		c.kind = appSubscribe
	case r.acks:
		c.ackID, _ = idOf(r.appAckID.get(data, &v))
		return c
	default:
		return c
	}
	c.replyID, _ = idOf(r.appReplyID.get(data, &v))
	if c.kind != appAuth && isSet(r.SubscriptionKey) {
		c.key, c.keyed = keyOf(r.subKey.get(data, &v))
	}
	return c
}

// upClass is everything the rules say about one upstream message.
type upClass struct {
	authOK     bool
	hideRepeat bool   // matches HideOnReconnectMatch
	replyID    string // "" when none
	ack        bool   // matches AckMatch and carries an id
	ackID      string
}

func (c upClass) any() bool { return c.authOK || c.hideRepeat || c.replyID != "" || c.ack }

// classifyUpstream applies the upstream-side rules to one message, reading
// its top level once.
func (r *ruleSet) classifyUpstream(data []byte) upClass {
	var v ruleValues
	r.upScan.read(data, &v)
	return r.classifyUpstreamIn(data, &v)
}

// classifyUpstreamIn is classifyUpstream for a message whose top level was
// read into v by upScan.
func (r *ruleSet) classifyUpstreamIn(data []byte, v *ruleValues) upClass {
	var c upClass
	c.authOK = r.authOK.match(data, v)
	c.hideRepeat = r.hideRepeat.match(data, v)
	c.replyID, _ = idOf(r.upReplyID.get(data, v))
	if r.acks && r.ackMatch.match(data, v) {
		c.ackID, c.ack = idOf(r.upAckID.get(data, v))
	}
	return c
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
