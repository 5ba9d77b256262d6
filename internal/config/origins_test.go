package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"
)

func TestAllowedOriginsVariable(t *testing.T) {
	tests := []struct {
		value string
		want  originList
	}{
		{"", nil},
		{"http://localhost:3000", originList{"http://localhost:3000"}},
		{" HTTP://LocalHost:3000 , https://app.example:443,", originList{"http://localhost:3000", "https://app.example"}},
		{"*", originList{"*"}},
	}
	for _, tt := range tests {
		cfg, err := Load(configtest.WithURL(map[string]string{"TETHER_ALLOWED_ORIGINS": tt.value}))
		if err != nil {
			t.Errorf("TETHER_ALLOWED_ORIGINS=%q: %v", tt.value, err)
			continue
		}
		if fmt.Sprint(cfg.AllowedOrigins) != fmt.Sprint(tt.want) {
			t.Errorf("TETHER_ALLOWED_ORIGINS=%q parsed as %q, want %q", tt.value, cfg.AllowedOrigins, tt.want)
		}
	}
	refused := map[string]string{
		"localhost:3000":              `entry 1 "localhost:3000": not an origin`,
		"http://localhost:3000/":      `entry 1 "http://localhost:3000/": not an origin`,
		"http://a.example,null":       `entry 2 "null": not an origin`,
		"*,http://localhost:3000":     `"*" allows every origin and must be the only entry`,
		"http://localhost:3000/index": `entry 1 "http://localhost:3000/index": not an origin`,
	}
	for value, want := range refused {
		lines := loadErrLines(t, configtest.WithURL(map[string]string{"TETHER_ALLOWED_ORIGINS": value}))
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "TETHER_ALLOWED_ORIGINS: "+want) {
			t.Errorf("TETHER_ALLOWED_ORIGINS=%q: problems %q, want one starting with %q", value, lines, want)
		}
	}
}
