package main

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/upstream"
)

const testSSEUpstream = "https://feed.example.com/v1/events"

// withSSEURL is withURL for an SSE upstream.
func withSSEURL(extra map[string]string) map[string]string {
	m := withURL(extra)
	m["TETHER_UPSTREAM_URL"] = testSSEUpstream
	return m
}

// The kind follows the URL's scheme unless set, and a kind that contradicts
// the scheme is refused naming both variables.
func TestUpstreamKind(t *testing.T) {
	tests := []struct {
		url, kind string
		want      upstream.Kind
		problem   string // "" when the configuration is valid
	}{
		{url: "ws://h/", want: upstream.KindWebSocket},
		{url: "wss://h/", want: upstream.KindWebSocket},
		{url: "http://h/", want: upstream.KindSSE},
		{url: "https://h/", want: upstream.KindSSE},
		{url: "https://h/", kind: "sse", want: upstream.KindSSE},
		{url: "wss://h/", kind: "WebSocket", want: upstream.KindWebSocket},
		{url: "http://h/", kind: " ", want: upstream.KindSSE},
		{url: "http://h/", kind: "websocket",
			problem: `TETHER_UPSTREAM_KIND: websocket contradicts TETHER_UPSTREAM_URL, whose scheme "http" means sse; use a ws:// or wss:// URL for websocket, or unset TETHER_UPSTREAM_KIND`},
		{url: "wss://h/", kind: "sse",
			problem: `TETHER_UPSTREAM_KIND: sse contradicts TETHER_UPSTREAM_URL, whose scheme "wss" means websocket; use an http:// or https:// URL for sse, or unset TETHER_UPSTREAM_KIND`},
		{url: "wss://h/", kind: "grpc", problem: `TETHER_UPSTREAM_KIND: unknown upstream kind "grpc": want websocket or sse`},
	}
	for _, tt := range tests {
		t.Run(tt.url+" "+tt.kind, func(t *testing.T) {
			env := map[string]string{"TETHER_UPSTREAM_URL": tt.url}
			if tt.kind != "" {
				env["TETHER_UPSTREAM_KIND"] = tt.kind
			}
			if tt.problem != "" {
				if lines := loadErrLines(t, env); !slices.Equal(lines, []string{tt.problem}) {
					t.Errorf("problems %q, want only %q", lines, tt.problem)
				}
				return
			}
			cfg, err := LoadConfig(env)
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if cfg.Kind() != tt.want {
				t.Errorf("Kind() = %v, want %v", cfg.Kind(), tt.want)
			}
		})
	}
}

// An SSE configuration reaches the upstream options: kind, format, the
// shared limit, TLS for https.
func TestSSEConfigReachesUpstream(t *testing.T) {
	cfg, err := LoadConfig(withSSEURL(map[string]string{
		"TETHER_SSE_FORMAT":            "data",
		"TETHER_MAX_MESSAGE_BYTES":     "64KiB",
		"TETHER_PING_INTERVAL":         "20s",
		"TETHER_HEARTBEAT_REPLY_MATCH": `{"event":"ping"}`,
	}))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	up := proxyUpstream(t, cfg)
	if up.Kind != upstream.KindSSE || up.SSEFormat != upstream.SSEData || up.URL != testSSEUpstream {
		t.Errorf("upstream options: kind %v, format %v, URL %q", up.Kind, up.SSEFormat, up.URL)
	}
	if up.MaxMessageBytes != 64<<10 || up.PingInterval.String() != "20s" || up.HeartbeatReply == nil {
		t.Errorf("upstream options: limit %d, ping interval %v, heartbeat reply %v", up.MaxMessageBytes, up.PingInterval, up.HeartbeatReply != nil)
	}
	if up.TLSConfig == nil {
		t.Error("no TLS configuration for an https:// upstream")
	}
	def, err := LoadConfig(withSSEURL(nil))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if def.SSEFormat != upstream.SSEJSON {
		t.Errorf("default TETHER_SSE_FORMAT = %v, want json", def.SSEFormat)
	}
	if lines := loadErrLines(t, withSSEURL(map[string]string{"TETHER_SSE_FORMAT": "xml"})); len(lines) != 1 ||
		!strings.HasPrefix(lines[0], `TETHER_SSE_FORMAT: unknown SSE format "xml"`) {
		t.Errorf("problems %q", lines)
	}
}

// Every setting that sends to the upstream is refused with an SSE upstream,
// one line per variable and nothing else (no "needs" advice about partners
// that would be refused too); the same settings are fine with WebSocket.
func TestSSERefusesMessageSettings(t *testing.T) {
	values := map[string]string{
		"TETHER_AUTH_MATCH":        `{"t":"login"}`,
		"TETHER_AUTH_OK_MATCH":     `{"t":"ok"}`,
		"TETHER_SUBSCRIBE_MATCH":   `{"t":"sub"}`,
		"TETHER_UNSUBSCRIBE_MATCH": `{"t":"unsub"}`,
		"TETHER_SUBSCRIPTION_KEY":  "channel",
		"TETHER_REPLY_ID_PATH":     "id",
		"TETHER_RESUME_MESSAGE":    `{"t":"resume","after":{{.LastSeq}}}`,
		"TETHER_HEARTBEAT_MESSAGE": "ping",
		"TETHER_ACK_ID_PATH":       "id",
		"TETHER_ACK_MATCH":         `{"t":"ack"}`,
	}
	if len(values) != len(sseRefused) {
		t.Fatalf("test covers %d variables, sseRefused lists %d", len(values), len(sseRefused))
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			lines := loadErrLines(t, withSSEURL(map[string]string{name: v}))
			want := name + ": an SSE upstream takes no messages, so this setting (it "
			if len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "cannot apply; unset it") {
				t.Errorf("problems %q, want one starting %q", lines, want)
			}
		})
	}
	lines := loadErrLines(t, withSSEURL(values))
	if len(lines) != len(values) {
		t.Errorf("all at once: %d problems, want %d:\n%s", len(lines), len(values), strings.Join(lines, "\n"))
	}
	ws := withURL(values)
	ws["TETHER_SEQ_PATH"] = "seq"
	if _, err := LoadConfig(ws); err != nil {
		t.Errorf("the same settings with a WebSocket upstream: %v", err)
	}
}

// With an SSE upstream the captured session id can only serve the catch-up
// URL, and the advice says so.
func TestSSESessionNeedsCatchUp(t *testing.T) {
	lines := loadErrLines(t, withSSEURL(map[string]string{
		"TETHER_SESSION_MATCH": `{"t":"welcome"}`,
		"TETHER_SESSION_PATH":  "session",
	}))
	if want := []string{"TETHER_SESSION_MATCH: needs TETHER_GAPFILL_URL"}; !slices.Equal(lines, want) {
		t.Errorf("problems %q, want %q", lines, want)
	}
}

// TETHER_SSE_FORMAT set for a WebSocket upstream is logged at start as
// having no effect; left at its default it is not.
func TestSSEFormatWarnedForWebSocket(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		warn bool
	}{
		{withURL(map[string]string{"TETHER_SSE_FORMAT": "data"}), true},
		{withURL(nil), false},
		{withSSEURL(map[string]string{"TETHER_SSE_FORMAT": "data"}), false},
	} {
		cfg, err := LoadConfig(tt.env)
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		core, logs := observer.New(zapcore.WarnLevel)
		warnSettings(cfg, zap.New(core))
		got := logs.FilterMessage("setting has no effect with a WebSocket upstream").Len() == 1
		if got != tt.warn {
			t.Errorf("%v: warned %v, want %v", tt.env, got, tt.warn)
		}
	}
}
