package config

import (
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"github.com/tetherproxy/tether/upstream"
)

// TestCompressionSetting: TETHER_UPSTREAM_COMPRESSION is auto by default,
// takes auto and off in any case, and names an unknown mode.
func TestCompressionSetting(t *testing.T) {
	for value, want := range map[string]upstream.Compression{"": upstream.CompressionAuto, "auto": upstream.CompressionAuto, "OFF": upstream.CompressionOff, " off ": upstream.CompressionOff} {
		cfg, err := Load(configtest.WithURL(map[string]string{"TETHER_UPSTREAM_COMPRESSION": value}))
		if err != nil || cfg.UpstreamCompression != want {
			t.Errorf("TETHER_UPSTREAM_COMPRESSION=%q: %v, %v; want %v", value, cfg.UpstreamCompression, err, want)
		}
	}
	lines := loadErrLines(t, configtest.WithURL(map[string]string{"TETHER_UPSTREAM_COMPRESSION": "gzip"}))
	if want := `TETHER_UPSTREAM_COMPRESSION: unknown compression mode "gzip": want auto or off`; len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Errorf("errors %q, want %q", lines, want)
	}
}
