package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"github.com/tetherproxy/tether/internal/config"
)

// TestEnvFileRun: tether run with only TETHER_ENV_FILE set reads its
// configuration from it; a bad value in the file is reported with the
// line that set it, and exits 2.
func TestEnvFileRun(t *testing.T) {
	file := configtest.EnvFile(t, "TETHER_UPSTREAM_URL=wss://feed.example.com/v1\nTETHER_PING_INTERVAL=soon\nTETHER_UPSTREM_TOKEN_FILE=/tmp/x\n")
	var stderr bytes.Buffer
	err := run(context.Background(), nil, map[string]string{config.EnvFileVar: file}, &bytes.Buffer{}, &stderr)
	if code := exitCode(err, &stderr); code != 2 {
		t.Fatalf("exit code %d (%v), want 2", code, err)
	}
	for _, want := range []string{
		`TETHER_PING_INTERVAL: invalid duration "soon": use a Go duration such as 500ms, 10s or 1m (set in ` + file + ` line 2)`,
		"TETHER_UPSTREM_TOKEN_FILE: unknown variable (did you mean TETHER_UPSTREAM_TOKEN_FILE?) (set in " + file + " line 3)",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
	bad := configtest.EnvFile(t, "TETHER_UPSTREAM_URL\n")
	stderr.Reset()
	err = run(context.Background(), nil, map[string]string{config.EnvFileVar: bad}, &bytes.Buffer{}, &stderr)
	if code := exitCode(err, &stderr); code != 2 || !strings.Contains(stderr.String(), bad+` line 1: no "="`) {
		t.Errorf("exit code %d, stderr %q; want 2 naming %s line 1", code, stderr.String(), bad)
	}
}
