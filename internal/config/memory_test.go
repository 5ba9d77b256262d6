package config

import (
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"
)

// A limit set below the sessions' shares is refused, naming the three
// variables; so is a zero limit or share.
func TestMemoryLimitValidation(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string // "" for valid
	}{
		{map[string]string{"TETHER_MEMORY_LIMIT": "64MiB"}, ""},
		{map[string]string{"TETHER_MEMORY_LIMIT": "32MiB"}, ""}, // 1024 × 32KiB exactly
		{map[string]string{"TETHER_MEMORY_LIMIT": "16MiB"},
			"TETHER_MEMORY_LIMIT: 16MiB is below TETHER_MAX_SESSIONS × TETHER_MEMORY_SHARE_BYTES = 1024 × 32KiB = 32MiB: raise it, or lower one of those"},
		{map[string]string{"TETHER_MEMORY_LIMIT": "16MiB", "TETHER_MAX_SESSIONS": "512"}, ""},
		{map[string]string{"TETHER_MEMORY_LIMIT": "1MiB", "TETHER_MEMORY_SHARE_BYTES": "1KiB"}, ""},
		{map[string]string{"TETHER_MEMORY_LIMIT": "0"}, `TETHER_MEMORY_LIMIT: must be > 0, got "0B"`},
		{map[string]string{"TETHER_MEMORY_SHARE_BYTES": "0"}, `TETHER_MEMORY_SHARE_BYTES: must be > 0, got "0B"`},
		{map[string]string{"TETHER_MEMORY_LIMIT": "8MB"}, "TETHER_MEMORY_LIMIT"},
	}
	for _, tt := range tests {
		_, err := Load(configtest.WithURL(tt.env))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v", tt.env, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: got %v, want an error containing %q", tt.env, err, tt.want)
		}
	}
}
