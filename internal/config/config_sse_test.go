package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"github.com/tetherproxy/tether/upstream"
)

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
			cfg, err := Load(env)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if cfg.Kind() != tt.want {
				t.Errorf("Kind() = %v, want %v", cfg.Kind(), tt.want)
			}
		})
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
			lines := loadErrLines(t, configtest.WithSSEURL(map[string]string{name: v}))
			want := name + ": an SSE upstream takes no messages, so this setting (it "
			if len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "cannot apply; unset it") {
				t.Errorf("problems %q, want one starting %q", lines, want)
			}
		})
	}
	lines := loadErrLines(t, configtest.WithSSEURL(values))
	if len(lines) != len(values) {
		t.Errorf("all at once: %d problems, want %d:\n%s", len(lines), len(values), strings.Join(lines, "\n"))
	}
	ws := configtest.WithURL(values)
	ws["TETHER_SEQ_PATH"] = "seq"
	if _, err := Load(ws); err != nil {
		t.Errorf("the same settings with a WebSocket upstream: %v", err)
	}
}

// With an SSE upstream the captured session id can only serve the catch-up
// URL, and the advice says so.
func TestSSESessionNeedsCatchUp(t *testing.T) {
	lines := loadErrLines(t, configtest.WithSSEURL(map[string]string{
		"TETHER_SESSION_MATCH": `{"t":"welcome"}`,
		"TETHER_SESSION_PATH":  "session",
	}))
	if want := []string{"TETHER_SESSION_MATCH: needs TETHER_GAPFILL_URL or TETHER_RESYNC_URL"}; !slices.Equal(lines, want) {
		t.Errorf("problems %q, want %q", lines, want)
	}
}

// An unknown TETHER_SSE_FORMAT is refused naming the variable and the value.
func TestSSEFormatRefused(t *testing.T) {
	if lines := loadErrLines(t, configtest.WithSSEURL(map[string]string{"TETHER_SSE_FORMAT": "xml"})); len(lines) != 1 ||
		!strings.HasPrefix(lines[0], `TETHER_SSE_FORMAT: unknown SSE format "xml"`) {
		t.Errorf("problems %q", lines)
	}
}
