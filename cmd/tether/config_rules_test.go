package main

import (
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"github.com/tetherproxy/tether/internal/config"
	"go.uber.org/zap"
)

// designExample is docs/design.md's worked example without what later issues add
// (session capture, resume message, sequences).
var designExample = map[string]string{
	"TETHER_UPSTREAM_URL":            "wss://feed.example.com/v1",
	"TETHER_SUBSCRIBE_MATCH":         `{"t":"sub"}`,
	"TETHER_UNSUBSCRIBE_MATCH":       `{"t":"unsub"}`,
	"TETHER_SUBSCRIPTION_KEY":        "channel",
	"TETHER_CONFIRM_MATCH":           `{"t":"welcome"}`,
	"TETHER_HIDE_ON_RECONNECT_MATCH": `{"t":"welcome"}`,
	"TETHER_ACK_ID_PATH":             "id",
	"TETHER_ACK_MATCH":               `{"t":"ack"}`,
}

// The example parses, and every rule reaches the proxy's options.
func TestRestoreRulesReachTheProxy(t *testing.T) {
	env := configtest.WithURL(designExample)
	env["TETHER_AUTH_MATCH"] = `{"op":"login"}`
	env["TETHER_AUTH_OK_MATCH"] = `{"op":"login","ok":true}`
	env["TETHER_REPLY_ID_PATH"] = "req"
	cfg, err := config.Load(env)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	opts, err := proxyOptions(cfg, zap.NewNop())
	if err != nil {
		t.Fatalf("proxyOptions: %v", err)
	}
	r := opts.Rules
	for name, got := range map[string]string{
		"TETHER_AUTH_MATCH":              r.AuthMatch.String(),
		"TETHER_AUTH_OK_MATCH":           r.AuthOKMatch.String(),
		"TETHER_SUBSCRIBE_MATCH":         r.SubscribeMatch.String(),
		"TETHER_UNSUBSCRIBE_MATCH":       r.UnsubscribeMatch.String(),
		"TETHER_SUBSCRIPTION_KEY":        r.SubscriptionKey.String(),
		"TETHER_REPLY_ID_PATH":           r.ReplyIDPath.String(),
		"TETHER_HIDE_ON_RECONNECT_MATCH": r.HideOnReconnectMatch.String(),
		"TETHER_ACK_ID_PATH":             r.AckIDPath.String(),
		"TETHER_ACK_MATCH":               r.AckMatch.String(),
	} {
		if got != env[name] {
			t.Errorf("%s reached the proxy as %q, want %q", name, got, env[name])
		}
	}
}

// Unset and empty rules stay off.
func TestRestoreRulesDefaultOff(t *testing.T) {
	cfg, err := config.Load(configtest.WithURL(map[string]string{"TETHER_SUBSCRIPTION_KEY": "", "TETHER_AUTH_MATCH": ""}))
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	r := messageRules(cfg)
	if r.AuthMatch != nil || r.SubscribeMatch != nil || r.AckMatch != nil || r.SubscriptionKey.String() != "" {
		t.Errorf("rules %+v, want all off", r)
	}
}
