package main

import (
	"strings"
	"testing"

	"go.uber.org/zap"
)

// designExample is DESIGN.md's worked example without what later issues add
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
	env := withURL(designExample)
	env["TETHER_AUTH_MATCH"] = `{"op":"login"}`
	env["TETHER_AUTH_OK_MATCH"] = `{"op":"login","ok":true}`
	env["TETHER_REPLY_ID_PATH"] = "req"
	cfg, err := LoadConfig(env)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
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
	cfg, err := LoadConfig(withURL(map[string]string{"TETHER_SUBSCRIPTION_KEY": "", "TETHER_AUTH_MATCH": ""}))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	r := restoreRules(cfg)
	if r.AuthMatch != nil || r.SubscribeMatch != nil || r.AckMatch != nil || r.SubscriptionKey.String() != "" {
		t.Errorf("rules %+v, want all off", r)
	}
}

// A rule that could never take effect without another is refused, naming
// both variables; a malformed pattern or path is refused with its variable.
func TestRestoreRulesValidation(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TETHER_AUTH_OK_MATCH": `{"ok":true}`}, "TETHER_AUTH_OK_MATCH: needs TETHER_AUTH_MATCH"},
		{map[string]string{"TETHER_UNSUBSCRIBE_MATCH": `{"t":"unsub"}`}, "TETHER_UNSUBSCRIBE_MATCH: needs TETHER_SUBSCRIBE_MATCH"},
		{map[string]string{"TETHER_SUBSCRIPTION_KEY": "channel"}, "TETHER_SUBSCRIPTION_KEY: needs TETHER_SUBSCRIBE_MATCH"},
		{map[string]string{"TETHER_REPLY_ID_PATH": "id"}, "TETHER_REPLY_ID_PATH: needs TETHER_AUTH_MATCH or TETHER_SUBSCRIBE_MATCH"},
		{map[string]string{"TETHER_ACK_ID_PATH": "id"}, "TETHER_ACK_ID_PATH: needs TETHER_ACK_MATCH"},
		{map[string]string{"TETHER_ACK_MATCH": `{"t":"ack"}`}, "TETHER_ACK_MATCH: needs TETHER_ACK_ID_PATH"},
		{map[string]string{"TETHER_SUBSCRIBE_MATCH": `{"t":`}, "TETHER_SUBSCRIBE_MATCH: invalid JSON"},
		{map[string]string{"TETHER_AUTH_MATCH": "re:("}, "TETHER_AUTH_MATCH: "},
		{map[string]string{"TETHER_SUBSCRIBE_MATCH": `{"t":"sub"}`, "TETHER_SUBSCRIPTION_KEY": "a..b"}, "TETHER_SUBSCRIPTION_KEY: path has an empty component"},
		{map[string]string{"TETHER_ACK_MATCH": `{"t":"ack"}`, "TETHER_ACK_ID_PATH": " id"}, "TETHER_ACK_ID_PATH: path has a leading"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			lines := loadErrLines(t, withURL(tt.env))
			if len(lines) != 1 || !strings.HasPrefix(lines[0], tt.want) {
				t.Errorf("problems = %q, want exactly one starting with %q", lines, tt.want)
			}
		})
	}
}
