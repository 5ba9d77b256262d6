package config

import (
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"
)

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
			lines := loadErrLines(t, configtest.WithURL(tt.env))
			if len(lines) != 1 || !strings.HasPrefix(lines[0], tt.want) {
				t.Errorf("problems = %q, want exactly one starting with %q", lines, tt.want)
			}
		})
	}
}
