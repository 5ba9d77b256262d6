package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"github.com/tetherproxy/tether/internal/config"
)

// TestServiceArgs: the command line of `tether service`, and its errors.
func TestServiceArgs(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, tc := range []struct {
		args    []string
		want    serviceArgs
		wantErr string
	}{
		{args: []string{"install", "--env-file", "tether.env"}, want: serviceArgs{action: "install", envFile: abs("tether.env")}},
		{args: []string{"run", "--env-file=/etc/tether.env", "--log-file", "/var/log/t.log"}, want: serviceArgs{action: "run", envFile: "/etc/tether.env", logFile: "/var/log/t.log"}},
		{args: []string{"uninstall"}, want: serviceArgs{action: "uninstall"}},
		{args: []string{"--help"}, want: serviceArgs{action: "help"}},
		{args: nil, wantErr: "tether service needs an action"},
		{args: []string{"start"}, wantErr: `tether service: unknown action "start"`},
		{args: []string{"install"}, wantErr: "tether service install needs --env-file PATH"},
		{args: []string{"install", "--env-file"}, wantErr: "tether service install: --env-file needs a path"},
		{args: []string{"install", "--env-file", "a", "--user", "bob"}, wantErr: `tether service install: unknown flag "--user"`},
		{args: []string{"uninstall", "--env-file", "a"}, wantErr: "tether service uninstall takes no flags"},
	} {
		got, err := parseServiceArgs(tc.args)
		if tc.wantErr != "" {
			var ue *usageError
			if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("%q: %v, want a usage error starting %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	a := serviceArgs{envFile: "/home/u/.config/tether/tether.env"}
	if got := a.logPath(); got != filepath.FromSlash("/home/u/.config/tether/tether.log") {
		t.Errorf("default log path %q, want tether.log beside the env file", got)
	}
}

// TestCheckServiceConfig: install checks the configuration the service
// will start with, the env file alone, and says which line is wrong.
func TestCheckServiceConfig(t *testing.T) {
	good := configtest.EnvFile(t, "TETHER_UPSTREAM_URL=wss://feed.example.com/v1\n")
	if err := checkServiceConfig(good); err != nil {
		t.Errorf("good file: %v", err)
	}
	bad := configtest.EnvFile(t, "TETHER_UPSTREAM_URL=wss://feed.example.com/v1\nTETHER_BACKOFF_CAP=1ms\n")
	err := checkServiceConfig(bad)
	var ce *config.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "TETHER_BACKOFF_CAP") || !strings.Contains(err.Error(), bad+" line 2") {
		t.Errorf("bad file: %v, want a configuration error naming TETHER_BACKOFF_CAP and %s line 2", err, bad)
	}
	if err := checkServiceConfig(configtest.EnvFile(t, "# nothing\n")); err == nil || !strings.Contains(err.Error(), "TETHER_UPSTREAM_URL: required") {
		t.Errorf("empty file: %v, want TETHER_UPSTREAM_URL required", err)
	}
}

// TestDesktopEnvExample: docs/desktop/tether.env, which docs/desktop.md
// says to start from, is a configuration tether starts with.
func TestDesktopEnvExample(t *testing.T) {
	if err := checkServiceConfig(filepath.Join("..", "..", "docs", "desktop", "tether.env")); err != nil {
		t.Fatalf("docs/desktop/tether.env: %v", err)
	}
}
