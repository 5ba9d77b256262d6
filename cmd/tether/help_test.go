package main

import (
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config"
)

func TestWriteHelp(t *testing.T) {
	var b strings.Builder
	writeHelp(&b)
	out := b.String()
	if !strings.HasPrefix(out, "usage: tether [demo|service|status|version|--help]\n") {
		t.Errorf("help does not start with the usage line:\n%s", out)
	}
	for _, want := range []string{
		"TETHER_UPSTREAM_URL (required)",
		"TETHER_DIAL_TIMEOUT (default 10s)",
		"TETHER_OUTBOX_MAX_BYTES (default 8MiB)",
		"TETHER_CONFIRM_MATCH (unset)",
		"TETHER_PERMANENT_CODES (default 1002,1003,1007,1008,1009,1010)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, want := range []string{
		"JSON containment patterns", "re: and a Go regular expression", "gjson paths", "Go text/templates",
		"KiB", "Go durations", "single-quote JSON values", "docs/configuration.md",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("help does not explain the syntax of values: it lacks %q", want)
		}
	}
	var vars strings.Builder
	config.WriteVariables(&vars)
	if !strings.Contains(out, vars.String()) {
		t.Errorf("help lacks the variables and their syntax:\n%s", out)
	}
}
