package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"
)

// TestEnvFileFormat: comments, blank lines, space, quotes, CRLF and a byte
// order mark are read as documented; the environment wins over the file,
// even with an empty value.
func TestEnvFileFormat(t *testing.T) {
	text := "\uFEFF# tether for the desktop\r\n" +
		"\r\n" +
		"TETHER_UPSTREAM_URL = wss://feed.example.com/v1?token=abc#x\r\n" +
		"  TETHER_LISTEN=\"127.0.0.1:7000, tcp://127.0.0.1:7001\"\n" +
		"TETHER_UPSTREAM_HEADERS='X-Team: desk \"a\", X-Env: prod'\n" +
		"TETHER_LOG_LEVEL=debug\n" +
		"TETHER_LOG_FORMAT=console\n" +
		"   # an indented comment\n" +
		"TETHER_PING_INTERVAL=\n"
	file := configtest.EnvFile(t, text)
	env, origins, err := WithEnvFile(map[string]string{EnvFileVar: file, "TETHER_LOG_LEVEL": "warn", "TETHER_LOG_FORMAT": "", "HOME": "/home/u"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"TETHER_UPSTREAM_URL":     "wss://feed.example.com/v1?token=abc#x",
		"TETHER_LISTEN":           "127.0.0.1:7000, tcp://127.0.0.1:7001",
		"TETHER_UPSTREAM_HEADERS": `X-Team: desk "a", X-Env: prod`,
		"TETHER_LOG_LEVEL":        "warn", // the environment's
		"TETHER_LOG_FORMAT":       "",     // the environment's, empty
		"TETHER_PING_INTERVAL":    "",
		"HOME":                    "/home/u",
	} {
		if got, ok := env[name]; !ok || got != want {
			t.Errorf("%s = %q (set %v), want %q", name, got, ok, want)
		}
	}
	if o := origins["TETHER_LISTEN"]; o.file != file || o.line != 4 {
		t.Errorf("TETHER_LISTEN from %+v, want %s line 4", o, file)
	}
	if _, ok := origins["TETHER_LOG_LEVEL"]; ok {
		t.Error("TETHER_LOG_LEVEL is said to come from the file, but the environment's value won")
	}
	if env2, _, err := WithEnvFile(map[string]string{"TETHER_LISTEN": "x"}); err != nil || len(env2) != 1 {
		t.Errorf("without TETHER_ENV_FILE: %v, %v; want the environment as it is", env2, err)
	}
}

// TestEnvFileErrors: every bad line is reported with the file and its line
// number, the value never echoed.
func TestEnvFileErrors(t *testing.T) {
	text := strings.Join([]string{
		"TETHER_UPSTREAM_URL=wss://feed.example.com/v1", // 1
		"TETHER_LISTEN 127.0.0.1:7000",                  // 2: no =
		"HTTPS_PROXY=http://proxy:3128",                 // 3: not TETHER_
		`TETHER_UPSTREAM_PROXY="http://u:s3cret@p:3128`, // 4: open quote
		"TETHER_UPSTREAM_URL=wss://other/v1",            // 5: again
		"export TETHER_LOG_LEVEL=debug",                 // 6
		"TETHER_ENV_FILE=/etc/other.env",                // 7
		"tether_log_level=debug",                        // 8: lower case
	}, "\n")
	file := configtest.EnvFile(t, text)
	_, _, err := WithEnvFile(map[string]string{EnvFileVar: file})
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		"TETHER_ENV_FILE: " + file + ` line 2: no "=": write TETHER_NAME=value`,
		"TETHER_ENV_FILE: " + file + ` line 3: "HTTPS_PROXY" is not a TETHER_* variable: the file sets tether's variables only (set TETHER_UPSTREAM_PROXY here instead)`,
		"TETHER_ENV_FILE: " + file + ` line 4: TETHER_UPSTREAM_PROXY: the value opens a " quote it does not close`,
		"TETHER_ENV_FILE: " + file + ` line 5: TETHER_UPSTREAM_URL is set again (first on line 1)`,
		"TETHER_ENV_FILE: " + file + ` line 6: "export TETHER_LOG_LEVEL": write the line without export`,
		"TETHER_ENV_FILE: " + file + ` line 7: TETHER_ENV_FILE cannot be set in the file it names`,
		"TETHER_ENV_FILE: " + file + ` line 8: "tether_log_level" is not a TETHER_* variable: the file sets tether's variables only (names are upper case: TETHER_LOG_LEVEL)`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("errors:\n%s\nwant %d", err, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want %q", i, lines[i], w)
		}
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Error("an error echoes the value")
	}
	_, _, err = WithEnvFile(map[string]string{EnvFileVar: filepath.Join(t.TempDir(), "missing.env")})
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "TETHER_ENV_FILE: ") {
		t.Errorf("missing file: %v, want an error naming TETHER_ENV_FILE", err)
	}
}
