//go:build !windows

package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestServiceElsewhere: off Windows, `tether service` says what to use
// instead and exits 2.
func TestServiceElsewhere(t *testing.T) {
	var out, stderr bytes.Buffer
	err := run(context.Background(), []string{"service", "install", "--env-file", "x.env"}, nil, &out, &stderr)
	if code := exitCode(err, &stderr); code != 2 {
		t.Fatalf("exit code %d (%v), want 2", code, err)
	}
	want := map[string]string{"linux": "systemctl --user enable --now tether", "darwin": "launchctl bootstrap gui/"}[runtime.GOOS]
	if !strings.Contains(stderr.String(), "tether service installs a Windows service; ") || !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want the advice for %s (%q)", stderr.String(), runtime.GOOS, want)
	}
	for goos, want := range map[string]string{"linux": "docs/desktop/tether.service", "darwin": "docs/desktop/com.tetherproxy.tether.plist", "freebsd": "TETHER_ENV_FILE"} {
		if got := serviceAdvice(goos); !strings.Contains(got, want) {
			t.Errorf("advice for %s %q lacks %q", goos, got, want)
		}
	}
}
