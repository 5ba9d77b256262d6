package main

import (
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/internal/protocol"
)

// The rules real protocols need load into the proxy's rules.
func TestConfigProtocolRules(t *testing.T) {
	cfg, err := config.Load(configtest.WithURL(map[string]string{
		"TETHER_SUBSCRIBE_MATCH":        `{"type":"subscribe"}`,
		"TETHER_SUBSCRIPTION_KEY":       "id",
		"TETHER_SUBSCRIPTION_END_MATCH": `{"type":"complete"}`,
		"TETHER_APP_PING_MATCH":         `{"type":"ping"}`,
		"TETHER_APP_PONG_MESSAGE":       `{"type":"pong"}`,
		"TETHER_APP_KEEPALIVE_MESSAGE":  `{"type":"ka"}`,
		"TETHER_APP_KEEPALIVE_INTERVAL": "20s",
		"TETHER_FRAMING":                "ndjson",
		"TETHER_SEQ_PATH":               "seq",
		"TETHER_SUBSCRIBE_REPLAY":       `{"type":"subscribe","id":{{json .Stream}},"from":{{.LastSeq}}}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	r := messageRules(cfg)
	if r.SubscriptionEndMatch == nil || r.AppPingMatch == nil || string(r.AppPongMessage) != `{"type":"pong"}` ||
		string(r.AppKeepaliveMessage) != `{"type":"ka"}` || r.AppKeepaliveInterval != 20*time.Second ||
		r.Framing != protocol.FramingNDJSON || !r.SubscribeReplay.IsSet() {
		t.Errorf("messageRules = %+v", r)
	}
}
