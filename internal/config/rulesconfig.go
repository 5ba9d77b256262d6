package config

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/upstream"
)

// The rules that real protocols showed missing (docs/protocols.md "Rules
// for protocols without a preset"): TETHER_SUBSCRIPTION_END_MATCH, the app
// keepalive pairs, TETHER_FRAMING and TETHER_SUBSCRIBE_REPLAY.

// protocolRulesSet says which of them are set, for the checks below and
// for the presets, which refuse them all (presetRefuses).
func (c Config) protocolRulesSet() map[string]bool {
	return map[string]bool{
		"TETHER_SUBSCRIPTION_END_MATCH": c.SubscriptionEndMatch != nil,
		"TETHER_APP_PING_MATCH":         c.AppPingMatch != nil,
		"TETHER_APP_PONG_MESSAGE":       c.AppPongMessage != "",
		"TETHER_APP_KEEPALIVE_MESSAGE":  c.AppKeepaliveMessage != "",
		"TETHER_APP_KEEPALIVE_INTERVAL": c.AppKeepaliveInterval != 0,
		"TETHER_FRAMING":                c.Framing != protocol.FramingNone,
		"TETHER_SUBSCRIBE_REPLAY":       c.SubscribeReplay.IsSet(),
	}
}

// validateProtocolRules refuses each of these rules that could never act:
// one half of a pair, a rule without what it reads, values that cannot be
// sent, and the rules that talk to the upstream when it is an SSE stream.
func (c Config) validateProtocolRules() error {
	set := c.protocolRulesSet()
	set["TETHER_SUBSCRIPTION_KEY"] = c.SubscriptionKey.String() != ""
	set["TETHER_SEQ_PATH"] = c.SeqPath.String() != ""
	needs := func(name string, others ...string) error {
		if !set[name] {
			return nil
		}
		var missing []string
		for _, o := range others {
			if !set[o] {
				missing = append(missing, o)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		return &problem{name: name, msg: "needs " + joinAnd(missing), related: missing}
	}
	errs := []error{
		needs("TETHER_SUBSCRIPTION_END_MATCH", "TETHER_SUBSCRIPTION_KEY"),
		needs("TETHER_APP_PING_MATCH", "TETHER_APP_PONG_MESSAGE"),
		needs("TETHER_APP_PONG_MESSAGE", "TETHER_APP_PING_MATCH"),
		needs("TETHER_APP_KEEPALIVE_MESSAGE", "TETHER_APP_KEEPALIVE_INTERVAL"),
		needs("TETHER_APP_KEEPALIVE_INTERVAL", "TETHER_APP_KEEPALIVE_MESSAGE"),
		needs("TETHER_SUBSCRIBE_REPLAY", "TETHER_SUBSCRIPTION_KEY", "TETHER_SEQ_PATH"),
		textMessage("TETHER_APP_PONG_MESSAGE", c.AppPongMessage),
		textMessage("TETHER_APP_KEEPALIVE_MESSAGE", c.AppKeepaliveMessage),
	}
	if c.AppKeepaliveInterval < 0 {
		errs = append(errs, newProblem("TETHER_APP_KEEPALIVE_INTERVAL", "must be > 0, got %q", c.AppKeepaliveInterval.String()))
	}
	if c.Kind() == upstream.KindSSE {
		for _, name := range []string{"TETHER_SUBSCRIPTION_END_MATCH", "TETHER_APP_PING_MATCH", "TETHER_APP_PONG_MESSAGE", "TETHER_SUBSCRIBE_REPLAY"} {
			if set[name] {
				errs = append(errs, &problem{name: name, msg: "an SSE upstream takes no messages and has no subscriptions: it could never act",
					related: []string{"TETHER_UPSTREAM_URL"}})
			}
		}
	}
	return errors.Join(errs...)
}

// textMessage refuses a message tether sends as a WebSocket text message
// that is not UTF-8 (RFC 6455 §8.1: the app would close with 1007).
func textMessage(name, v string) error {
	if !utf8.ValidString(v) {
		return newProblem(name, "not valid UTF-8; it is sent as a text message")
	}
	return nil
}

func joinAnd(names []string) string {
	switch len(names) {
	case 1:
		return names[0]
	case 2:
		return names[0] + " and " + names[1]
	}
	return fmt.Sprint(names)
}
