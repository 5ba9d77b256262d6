// Package configtest holds what the tests of internal/config and of the
// commands that load it share: a minimal valid environment and an
// environment file on disk. It imports nothing of tether, so that
// internal/config's own tests can use it too; only tests import it.
package configtest

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// Upstream and SSEUpstream are the upstream URLs of WithURL and WithSSEURL;
// nothing dials them.
const (
	Upstream    = "wss://feed.example.com/v1"
	SSEUpstream = "https://feed.example.com/v1/events"
)

// WithURL returns a minimal valid environment (TETHER_UPSTREAM_URL, a
// WebSocket upstream) plus extra, whose variables win.
func WithURL(extra map[string]string) map[string]string {
	m := map[string]string{"TETHER_UPSTREAM_URL": Upstream}
	maps.Copy(m, extra)
	return m
}

// WithSSEURL is WithURL for an SSE upstream.
func WithSSEURL(extra map[string]string) map[string]string {
	m := WithURL(extra)
	m["TETHER_UPSTREAM_URL"] = SSEUpstream
	return m
}

// EnvFile writes text as a TETHER_ENV_FILE in the test's temporary
// directory and returns its path.
func EnvFile(t testing.TB, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tether.env")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
