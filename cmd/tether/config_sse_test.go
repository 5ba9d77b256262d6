package main

import (
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/upstream"
)

// An SSE configuration reaches the upstream options: kind, format, the
// shared limit, TLS for https.
func TestSSEConfigReachesUpstream(t *testing.T) {
	cfg, err := config.Load(configtest.WithSSEURL(map[string]string{
		"TETHER_SSE_FORMAT":            "data",
		"TETHER_MAX_MESSAGE_BYTES":     "64KiB",
		"TETHER_PING_INTERVAL":         "20s",
		"TETHER_HEARTBEAT_REPLY_MATCH": `{"event":"ping"}`,
	}))
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	opts, err := proxyOptions(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	up := opts.Upstream
	if up.Kind != upstream.KindSSE || up.SSEFormat != upstream.SSEData || up.URL != configtest.SSEUpstream {
		t.Errorf("upstream options: kind %v, format %v, URL %q", up.Kind, up.SSEFormat, up.URL)
	}
	if up.MaxMessageBytes != 64<<10 || up.PingInterval.String() != "20s" || opts.Rules.HeartbeatReplyMatch == nil {
		t.Errorf("upstream options: limit %d, ping interval %v, heartbeat reply %v", up.MaxMessageBytes, up.PingInterval, opts.Rules.HeartbeatReplyMatch != nil)
	}
	if up.TLSConfig == nil {
		t.Error("no TLS configuration for an https:// upstream")
	}
	def, err := config.Load(configtest.WithSSEURL(nil))
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	if def.SSEFormat != upstream.SSEJSON {
		t.Errorf("default TETHER_SSE_FORMAT = %v, want json", def.SSEFormat)
	}
}

// TETHER_SSE_FORMAT set for a WebSocket upstream is logged at start as
// having no effect; left at its default it is not.
func TestSSEFormatWarnedForWebSocket(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		warn bool
	}{
		{configtest.WithURL(map[string]string{"TETHER_SSE_FORMAT": "data"}), true},
		{configtest.WithURL(nil), false},
		{configtest.WithSSEURL(map[string]string{"TETHER_SSE_FORMAT": "data"}), false},
	} {
		cfg, err := config.Load(tt.env)
		if err != nil {
			t.Fatalf("config.Load: %v", err)
		}
		core, logs := observer.New(zapcore.WarnLevel)
		warnSettings(cfg, zap.New(core))
		got := logs.FilterMessage("setting has no effect with a WebSocket upstream").Len() == 1
		if got != tt.warn {
			t.Errorf("%v: warned %v, want %v", tt.env, got, tt.warn)
		}
	}
}
