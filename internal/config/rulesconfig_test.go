package config

import (
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"
)

// Bad values and half pairs are refused at start, naming the variable and
// what it needs; a preset refuses them all, naming both.
func TestConfigProtocolRulesRefused(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{configtest.WithURL(map[string]string{"TETHER_SUBSCRIPTION_END_MATCH": `{"type":"complete"}`}), "TETHER_SUBSCRIPTION_END_MATCH: needs TETHER_SUBSCRIPTION_KEY"},
		{configtest.WithURL(map[string]string{"TETHER_APP_PING_MATCH": `{"type":"ping"}`}), "TETHER_APP_PING_MATCH: needs TETHER_APP_PONG_MESSAGE"},
		{configtest.WithURL(map[string]string{"TETHER_APP_PONG_MESSAGE": `pong`}), "TETHER_APP_PONG_MESSAGE: needs TETHER_APP_PING_MATCH"},
		{configtest.WithURL(map[string]string{"TETHER_APP_KEEPALIVE_MESSAGE": `ka`}), "TETHER_APP_KEEPALIVE_MESSAGE: needs TETHER_APP_KEEPALIVE_INTERVAL"},
		{configtest.WithURL(map[string]string{"TETHER_APP_KEEPALIVE_INTERVAL": `5s`}), "TETHER_APP_KEEPALIVE_INTERVAL: needs TETHER_APP_KEEPALIVE_MESSAGE"},
		{configtest.WithURL(map[string]string{"TETHER_APP_KEEPALIVE_MESSAGE": `ka`, "TETHER_APP_KEEPALIVE_INTERVAL": `-5s`}), `TETHER_APP_KEEPALIVE_INTERVAL: must be > 0, got "-5s"`},
		{configtest.WithURL(map[string]string{"TETHER_APP_KEEPALIVE_MESSAGE": "k\xffa", "TETHER_APP_KEEPALIVE_INTERVAL": `5s`}), "TETHER_APP_KEEPALIVE_MESSAGE: not valid UTF-8"},
		{configtest.WithURL(map[string]string{"TETHER_APP_KEEPALIVE_INTERVAL": `often`}), "TETHER_APP_KEEPALIVE_INTERVAL"},
		{configtest.WithURL(map[string]string{"TETHER_FRAMING": "lines"}), `TETHER_FRAMING: `},
		{configtest.WithURL(map[string]string{"TETHER_SUBSCRIBE_MATCH": `{"t":"sub"}`, "TETHER_SUBSCRIPTION_KEY": "ch", "TETHER_SUBSCRIBE_REPLAY": `{"from":{{.LastSeq}}}`}),
			"TETHER_SUBSCRIBE_REPLAY: needs TETHER_SEQ_PATH"},
		{configtest.WithURL(map[string]string{"TETHER_SUBSCRIBE_REPLAY": `{"from":{{.Last}}}`}), "TETHER_SUBSCRIBE_REPLAY: "},
		{map[string]string{"TETHER_UPSTREAM_URL": "https://127.0.0.1:9/events", "TETHER_APP_PING_MATCH": `{"type":"ping"}`, "TETHER_APP_PONG_MESSAGE": "pong"},
			"TETHER_APP_PING_MATCH: an SSE upstream takes no messages"},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws", "TETHER_APP_PING_MATCH": `{"type":"ping"}`, "TETHER_APP_PONG_MESSAGE": "pong"}),
			"TETHER_APP_PING_MATCH: contradicts TETHER_PROTOCOL=graphql-ws"},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws", "TETHER_FRAMING": "ndjson"}), "TETHER_FRAMING: contradicts TETHER_PROTOCOL=graphql-ws"},
		{configtest.WithURL(map[string]string{"TETHER_PROTOCOL": "graphql-ws", "TETHER_APP_KEEPALIVE_MESSAGE": "ka", "TETHER_APP_KEEPALIVE_INTERVAL": "1s"}),
			"TETHER_APP_KEEPALIVE_INTERVAL: contradicts TETHER_PROTOCOL=graphql-ws"},
	}
	for _, c := range cases {
		_, err := Load(c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%v) = %v, want a problem containing %q", c.env, err, c.want)
		}
	}
}
