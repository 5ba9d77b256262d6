package config

import (
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"github.com/gobwas/ws"
	"github.com/tetherproxy/tether/internal/protocol/centrifuge"
	"github.com/tetherproxy/tether/internal/protocol/graphqllegacy"

	"github.com/tetherproxy/tether/internal/protocol/graphqlws"
	"github.com/tetherproxy/tether/internal/protocol/nats"
	"github.com/tetherproxy/tether/internal/protocol/stomp"
	"github.com/tetherproxy/tether/upstream"
)

// TETHER_PROTOCOL=graphql-ws: the preset's close codes replace the generic
// defaults, an explicit list still wins, and the proxy gets the preset.
func TestConfigGraphQLWSPreset(t *testing.T) {
	cfg, err := Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws", "TETHER_GRAPHQL_RERUN": "queries"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.PermanentCodes.String(), mustCodeSet(t, graphqlws.PermanentCodes).String(); got != want {
		t.Errorf("PermanentCodes = %s, want the preset's %s", got, want)
	}
	if got := cfg.ReauthCodes.String(); got != graphqlws.ReauthCodes {
		t.Errorf("ReauthCodes = %s, want the preset's %s", got, graphqlws.ReauthCodes)
	}
	if cfg.GraphQLRerun != graphqlws.RerunQueries || cfg.Preset() == nil {
		t.Errorf("GraphQLRerun = %v, preset %v", cfg.GraphQLRerun, cfg.Preset())
	}
	cfg, err = Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws", "TETHER_PERMANENT_CODES": "4400", "TETHER_REAUTH_CODES": " "}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PermanentCodes.String() != "4400" || cfg.ReauthCodes.String() != "" {
		t.Errorf("explicit codes replaced: permanent %s, reauth %q", cfg.PermanentCodes, cfg.ReauthCodes)
	}
	cfg, err = Load(configtest.WithURL(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Protocol != protocolRules || cfg.Preset() != nil || cfg.PermanentCodes.String() != mustCodeSet(t, upstream.DefaultPermanentCodes).String() {
		t.Errorf("default: protocol %q, preset %v, permanent %s", cfg.Protocol, cfg.Preset(), cfg.PermanentCodes)
	}
}

// What contradicts the preset is refused, naming both variables.
func TestConfigGraphQLWSContradictions(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws", "TETHER_SUBSCRIBE_MATCH": `{"type":"subscribe"}`}),
			"TETHER_SUBSCRIBE_MATCH: contradicts TETHER_PROTOCOL=graphql-ws"},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws", "TETHER_SEQ_PATH": "payload.data.n"}),
			"TETHER_SEQ_PATH: contradicts TETHER_PROTOCOL=graphql-ws"},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws", "TETHER_CONFIRM_MATCH": `{"type":"connection_ack"}`}),
			"TETHER_CONFIRM_MATCH: contradicts TETHER_PROTOCOL=graphql-ws"},
		{configtest.WithURL(map[string]string{"TETHER_GRAPHQL_RERUN": "all"}), "TETHER_GRAPHQL_RERUN: needs TETHER_PROTOCOL=graphql-ws"},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws-legacy", "TETHER_UNSUBSCRIBE_MATCH": `{"type":"stop"}`}),
			"TETHER_UNSUBSCRIBE_MATCH: contradicts TETHER_PROTOCOL=graphql-ws-legacy, which reads connection_init, start"},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "centrifuge", "TETHER_SEQ_PATH": "push.pub.offset"}),
			"TETHER_SEQ_PATH: contradicts TETHER_PROTOCOL=centrifuge"},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "centrifuge", "TETHER_GRAPHQL_RERUN": "all"}),
			"TETHER_GRAPHQL_RERUN: needs TETHER_PROTOCOL=graphql-ws"},
		{map[string]string{"TETHER_UPSTREAM_URL": "https://127.0.0.1:9/events", "TETHER_PROTOCOL": "graphql-ws-legacy"},
			"TETHER_PROTOCOL: graphql-ws-legacy needs a ws:// or wss:// TETHER_UPSTREAM_URL"},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql"}), `TETHER_PROTOCOL: `},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws", "TETHER_GRAPHQL_RERUN": "some"}), `TETHER_GRAPHQL_RERUN: `},
		{map[string]string{"TETHER_UPSTREAM_URL": "https://127.0.0.1:9/events", "TETHER_PROTOCOL": "graphql-ws"},
			"TETHER_PROTOCOL: graphql-ws needs a ws:// or wss:// TETHER_UPSTREAM_URL"},
	}
	for _, c := range cases {
		_, err := Load(c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%v) = %v, want a problem containing %q", c.env, err, c.want)
		}
	}
}

// TETHER_PROTOCOL=stomp: the proxy gets the STOMP preset, which keeps the
// generic close codes, and a rule variable is refused naming both.
func TestConfigSTOMPPreset(t *testing.T) {
	cfg, err := Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "stomp"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Preset().(*stomp.Protocol); !ok || cfg.PermanentCodes.String() != mustCodeSet(t, upstream.DefaultPermanentCodes).String() {
		t.Errorf("preset %T, permanent %s", cfg.Preset(), cfg.PermanentCodes)
	}
	_, err = Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "stomp", "TETHER_AUTH_MATCH": `re:^CONNECT\n`}))
	if err == nil || !strings.Contains(err.Error(), "TETHER_AUTH_MATCH: contradicts TETHER_PROTOCOL=stomp, which reads CONNECT") {
		t.Errorf("a rule under the stomp preset: %v", err)
	}
	_, err = Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "stomp", "TETHER_GRAPHQL_RERUN": "all"}))
	if err == nil || !strings.Contains(err.Error(), "TETHER_GRAPHQL_RERUN: needs TETHER_PROTOCOL=graphql-ws") {
		t.Errorf("TETHER_GRAPHQL_RERUN under the stomp preset: %v", err)
	}
}

// TETHER_PROTOCOL=nats: the proxy gets the NATS preset, and a rule
// variable is refused naming both.
func TestConfigNATSPreset(t *testing.T) {
	cfg, err := Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "nats"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Preset().(*nats.Protocol); !ok {
		t.Errorf("preset %T", cfg.Preset())
	}
	_, err = Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "nats", "TETHER_SUBSCRIBE_MATCH": `re:^SUB `}))
	if err == nil || !strings.Contains(err.Error(), "TETHER_SUBSCRIBE_MATCH: contradicts TETHER_PROTOCOL=nats, which reads CONNECT, SUB") {
		t.Errorf("a rule under the nats preset: %v", err)
	}
}

// TETHER_PROTOCOL=graphql-ws-legacy: the generic close codes, the rerun
// choice honoured, and the proxy gets the preset.
func TestConfigGraphQLWSLegacyPreset(t *testing.T) {
	cfg, err := Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws-legacy", "TETHER_GRAPHQL_RERUN": "all"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.PermanentCodes.String(), mustCodeSet(t, upstream.DefaultPermanentCodes).String(); got != want {
		t.Errorf("PermanentCodes = %s, want the generic %s", got, want)
	}
	p, ok := cfg.Preset().(*graphqllegacy.Protocol)
	if !ok {
		t.Fatalf("preset %T, want *graphqllegacy.Protocol", cfg.Preset())
	}
	if p.App([]byte(`{"id":"m","type":"start","payload":{"query":"mutation { m }"}}`)).AtMostOnce {
		t.Error("TETHER_GRAPHQL_RERUN=all not passed to the preset: a mutation is at most once")
	}
}

// TETHER_PROTOCOL=centrifuge: the protocol's close codes, and the preset
// sequences what it reads under the generic gap policy.
func TestConfigCentrifugePreset(t *testing.T) {
	cfg, err := Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "centrifuge", "TETHER_GAP_POLICY": "skip"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.PermanentCodes.String(), mustCodeSet(t, centrifuge.PermanentCodes).String(); got != want {
		t.Errorf("PermanentCodes = %s, want the preset's %s", got, want)
	}
	if _, ok := cfg.Preset().(*centrifuge.Protocol); !ok {
		t.Fatalf("preset %T, want *centrifuge.Protocol", cfg.Preset())
	}
}

// TETHER_PROTOCOL=mqtt: the proxy gets the preset, framed and bounded by
// TETHER_MAX_MESSAGE_BYTES; the generic close codes stay; the rule
// variables it reads itself, and graphql-ws's own, are refused.
func TestConfigMQTTPreset(t *testing.T) {
	cfg, err := Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "mqtt", "TETHER_MAX_MESSAGE_BYTES": "1KiB"}))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Preset()
	if p == nil || p.Capabilities().Framing == nil {
		t.Fatalf("preset %v: want the framed mqtt preset", p)
	}
	if _, err := p.Capabilities().Framing().Split(ws.OpBinary, append([]byte{0x30, 0x80, 0x08}, make([]byte, 1024)...)); err == nil {
		t.Error("a 1 KiB PUBLISH framed with TETHER_MAX_MESSAGE_BYTES=1KiB")
	}
	if got, want := cfg.PermanentCodes.String(), mustCodeSet(t, upstream.DefaultPermanentCodes).String(); got != want {
		t.Errorf("PermanentCodes = %s, want the generic %s", got, want)
	}
	for _, c := range []struct{ env, value, want string }{
		{"TETHER_SUBSCRIBE_MATCH", "re:^\\x82", "TETHER_SUBSCRIBE_MATCH: contradicts TETHER_PROTOCOL=mqtt, which reads CONNECT"},
		{"TETHER_HEARTBEAT_MESSAGE", "ping", "TETHER_HEARTBEAT_MESSAGE: contradicts TETHER_PROTOCOL=mqtt"},
		{"TETHER_GRAPHQL_RERUN", "all", "TETHER_GRAPHQL_RERUN: needs TETHER_PROTOCOL=graphql-ws"},
	} {
		_, err := Load(configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "mqtt", c.env: c.value}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TETHER_PROTOCOL=mqtt %s=%s: %v, want %q", c.env, c.value, err, c.want)
		}
	}
	_, err = Load(map[string]string{"TETHER_UPSTREAM_URL": "https://127.0.0.1:9/events", "TETHER_PROTOCOL": "mqtt"})
	if err == nil || !strings.Contains(err.Error(), "TETHER_PROTOCOL: mqtt needs a ws:// or wss:// TETHER_UPSTREAM_URL") {
		t.Errorf("mqtt over SSE: %v", err)
	}
}
