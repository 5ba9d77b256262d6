package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/protocol/centrifuge"
	"github.com/tetherproxy/tether/internal/protocol/graphqllegacy"
	"github.com/tetherproxy/tether/internal/protocol/graphqlws"
	"github.com/tetherproxy/tether/internal/protocol/mqtt"
	"github.com/tetherproxy/tether/internal/protocol/nats"
	"github.com/tetherproxy/tether/internal/protocol/stomp"
	"github.com/tetherproxy/tether/upstream"
)

// TETHER_PROTOCOL: the TETHER_* rules, or a preset that reads its
// protocol's messages itself (internal/protocol/graphqlws,
// internal/protocol/graphqllegacy, internal/protocol/stomp,
// internal/protocol/nats). A preset owns
// the restore behaviour, so the rule variables it would contradict are
// configuration errors naming both; its close codes are the defaults of
// TETHER_PERMANENT_CODES and TETHER_REAUTH_CODES, which an explicit
// variable still replaces.

// protocolName is TETHER_PROTOCOL's value.
type protocolName string

const (
	protocolRules        protocolName = "rules"
	protocolGraphQLWS    protocolName = "graphql-ws"
	protocolGraphQLWSOld protocolName = "graphql-ws-legacy"
	protocolSTOMP        protocolName = "stomp"
	protocolNATS         protocolName = "nats"
	protocolCentrifuge   protocolName = "centrifuge"
	protocolMQTT         protocolName = "mqtt"
)

var protocolNames = []protocolName{
	protocolRules,
	protocolGraphQLWS,
	protocolGraphQLWSOld,
	protocolSTOMP,
	protocolNATS,
	protocolCentrifuge,
	protocolMQTT,
}

// UnmarshalText accepts the names in protocolNames.
func (p *protocolName) UnmarshalText(b []byte) error {
	if !slices.Contains(protocolNames, protocolName(b)) {
		return fmt.Errorf("%q: want one of %v", b, protocolNames)
	}
	*p = protocolName(b)
	return nil
}

// presetSpec is what the configuration knows of one preset.
type presetSpec struct {
	// permanent and reauth are the preset's defaults of
	// TETHER_PERMANENT_CODES and TETHER_REAUTH_CODES; "": the generic one.
	permanent, reauth string
	// reads names the messages the preset reads itself, for the error
	// naming a rule variable that contradicts it.
	reads string
	// rerun: TETHER_GRAPHQL_RERUN applies.
	rerun bool
	new   func(c Config) protocol.Protocol
}

// presets are the TETHER_PROTOCOL values other than rules.
var presets = map[protocolName]presetSpec{
	protocolGraphQLWS: {
		permanent: graphqlws.PermanentCodes, reauth: graphqlws.ReauthCodes, rerun: true,
		reads: "connection_init, subscribe, complete, error and ping",
		new: func(c Config) protocol.Protocol {
			return graphqlws.New(graphqlws.Options{Rerun: c.GraphQLRerun})
		},
	},
	protocolGraphQLWSOld: {
		rerun: true,
		reads: "connection_init, start, stop, complete and error",
		new: func(c Config) protocol.Protocol {
			return graphqllegacy.New(graphqllegacy.Options{Rerun: c.GraphQLRerun})
		},
	},
	protocolSTOMP: {
		reads: "CONNECT, SUBSCRIBE, UNSUBSCRIBE, RECEIPT, ACK, NACK and heart-beats",
		new:   func(Config) protocol.Protocol { return stomp.New() },
	},
	protocolNATS: {
		reads: "CONNECT, SUB, UNSUB, INFO, PING and PONG",
		new:   func(Config) protocol.Protocol { return nats.New() },
	},
	protocolCentrifuge: {
		permanent: centrifuge.PermanentCodes,
		reads:     "connect, subscribe, unsubscribe, replies, publications, unsubscribe pushes and pings",
		new:       func(Config) protocol.Protocol { return centrifuge.New(centrifuge.Options{}) },
	},
	protocolMQTT: {
		reads: "CONNECT, SUBSCRIBE, UNSUBSCRIBE, PINGREQ and the acknowledgements of PUBLISH",
		new: func(c Config) protocol.Protocol {
			return mqtt.New(mqtt.Options{MaxPacket: int(c.MaxMessageBytes)})
		},
	},
}

// presetDefaults puts the preset's close codes in place of the generic
// defaults of the variables environ leaves unset.
func (c *Config) presetDefaults(environ map[string]string) {
	spec, ok := presets[c.Protocol]
	if !ok {
		return
	}
	// Empty is unset, as for every variable with a default (caarlos0/env);
	// a blank value is the explicit empty list.
	if environ["TETHER_PERMANENT_CODES"] == "" && spec.permanent != "" {
		c.PermanentCodes, _ = upstream.ParseCodeSet(spec.permanent)
	}
	if environ["TETHER_REAUTH_CODES"] == "" && spec.reauth != "" {
		c.ReauthCodes, _ = upstream.ParseCodeSet(spec.reauth)
	}
}

// presetRefuses are the variables a preset sets itself: the message rules
// and the sequence rules (a preset numbers what it numbers itself, under
// the generic TETHER_GAP_POLICY and TETHER_GAP_TIMEOUT).
func (c Config) presetRefuses() map[string]bool {
	refused := c.protocolRulesSet()
	maps.Copy(refused, map[string]bool{
		"TETHER_AUTH_MATCH":              c.AuthMatch != nil,
		"TETHER_AUTH_OK_MATCH":           c.AuthOKMatch != nil,
		"TETHER_SUBSCRIBE_MATCH":         c.SubscribeMatch != nil,
		"TETHER_UNSUBSCRIBE_MATCH":       c.UnsubscribeMatch != nil,
		"TETHER_SUBSCRIPTION_KEY":        c.SubscriptionKey.String() != "",
		"TETHER_REPLY_ID_PATH":           c.ReplyIDPath.String() != "",
		"TETHER_HIDE_ON_RECONNECT_MATCH": c.HideOnReconnectMatch != nil,
		"TETHER_ACK_ID_PATH":             c.AckIDPath.String() != "",
		"TETHER_ACK_MATCH":               c.AckMatch != nil,
		"TETHER_CONFIRM_MATCH":           c.ConfirmMatch != nil,
		"TETHER_HEARTBEAT_REPLY_MATCH":   c.HeartbeatReplyMatch != nil,
		"TETHER_HEARTBEAT_MESSAGE":       c.HeartbeatMessage != "",
		"TETHER_SESSION_MATCH":           c.SessionMatch != nil,
		"TETHER_SESSION_PATH":            c.SessionPath.String() != "",
		"TETHER_RESUME_MESSAGE":          c.ResumeMessage.IsSet(),
		"TETHER_SEQ_PATH":                c.SeqPath.String() != "",
		"TETHER_STREAM_PATH":             c.StreamPath.String() != "",
		"TETHER_RESYNC_MATCH":            c.ResyncMatch != nil,
		"TETHER_RESYNC_SEQ_PATH":         c.ResyncSeqPath.String() != "",
		"TETHER_EPOCH_PATH":              c.EpochPath.String() != "",
		"TETHER_SEQ_FIRST_PATH":          c.SeqFirstPath.String() != "",
		"TETHER_SEQ_PREV_PATH":           c.SeqPrevPath.String() != "",
		"TETHER_GAPFILL_URL":             c.GapFillURL.IsSet(),
		"TETHER_RESYNC_URL":              c.ResyncURL.IsSet(),
		"TETHER_GAP_NOTICE":              c.GapNotice.IsSet(),
	})
	return refused
}

// validateProtocol refuses what contradicts TETHER_PROTOCOL: a rule
// variable under a preset, a preset's own variable without it, a preset
// for an SSE upstream (which takes no messages).
func (c Config) validateProtocol() error {
	spec, ok := presets[c.Protocol]
	if !spec.rerun && c.GraphQLRerun != graphqlws.RerunNone {
		return &problem{name: "TETHER_GRAPHQL_RERUN", msg: "needs TETHER_PROTOCOL=graphql-ws or graphql-ws-legacy", related: []string{"TETHER_PROTOCOL"}}
	}
	if !ok {
		return nil
	}
	if c.Kind() == upstream.KindSSE {
		return &problem{name: "TETHER_PROTOCOL", msg: string(c.Protocol) + " needs a ws:// or wss:// TETHER_UPSTREAM_URL, not an SSE upstream",
			related: []string{"TETHER_UPSTREAM_URL", "TETHER_UPSTREAM_KIND"}}
	}
	var errs []error
	refused := c.presetRefuses()
	for _, name := range sortedKeys(refused) {
		if refused[name] {
			errs = append(errs, &problem{name: name, msg: fmt.Sprintf("contradicts TETHER_PROTOCOL=%s, which reads %s itself; unset it (docs/protocols.md %q)",
				c.Protocol, spec.reads, c.Protocol), related: []string{"TETHER_PROTOCOL"}})
		}
	}
	return errors.Join(errs...)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Preset returns the protocol TETHER_PROTOCOL names, nil for the rules.
func (c Config) Preset() protocol.Protocol {
	if spec, ok := presets[c.Protocol]; ok {
		return spec.new(c)
	}
	return nil
}
