package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/proxy"
)

// Credentials planted in every configuration FuzzLoadConfig parses.
const (
	fuzzHeaderSecret   = "hdr-secret-Qx7"
	fuzzTokenSecret    = "tok-secret-Wr4"
	fuzzPasswordSecret = "pw-secret-Ez9"
	fuzzQuerySecret    = "qs-secret-Tn2"
)

// FuzzLoadConfig parses arbitrary values of a few variables, next to a token
// file, a secret header and a URL carrying a password and a query token.
// config.Load never panics; a refusal is a *config.Error whose problems each
// name a known variable on one line and never quote a credential; a
// configuration it accepts is one proxy.New accepts too, and its redacted
// URL hides the credentials.
func FuzzLoadConfig(f *testing.F) {
	f.Add("feed.example.com", "X-Trace: 1", "127.0.0.1:8080", "http://localhost:3000", "16MiB", "1002,4100-4999", `{"op":"subscribe"}`, "500ms")
	f.Add("h:port", "X Bad: v", "8080", "localhost:3000", "2GiB", "10x", "re:(", "-1s")
	f.Add("feed.example.com", "", "127.0.0.1:0, tcp://[::1]:7000,unix:///run/t.sock", "", "1KiB", "", "", "1s")
	f.Add("feed.example.com", "", "unix://rel,ws://h:1/p?q,tcp://h:1,tcp://h:1", "", "1KiB", "", "", "1s")
	tokenFile := filepath.Join(f.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(fuzzTokenSecret+"\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host, headers, listen, origins, maxMessage, codes, subscribe, backoff string) {
		env := map[string]string{
			"TETHER_UPSTREAM_URL":        "wss://svc:" + fuzzPasswordSecret + "@" + host + "/v1?token=" + fuzzQuerySecret,
			"TETHER_UPSTREAM_HEADERS":    "X-Secret: " + fuzzHeaderSecret + "\n" + headers,
			"TETHER_UPSTREAM_TOKEN_FILE": tokenFile,
			"TETHER_LISTEN":              listen,
			"TETHER_ALLOWED_ORIGINS":     origins,
			"TETHER_MAX_MESSAGE_BYTES":   maxMessage,
			"TETHER_PERMANENT_CODES":     codes,
			"TETHER_SUBSCRIBE_MATCH":     subscribe,
			"TETHER_BACKOFF_BASE":        backoff,
		}
		inputs := strings.Join([]string{host, headers, listen, origins, maxMessage, codes, subscribe, backoff}, "\x00")
		cfg, err := config.Load(env)
		if err != nil {
			checkConfigError(t, err, inputs)
			return
		}
		secrets := []string{fuzzHeaderSecret, fuzzTokenSecret, fuzzPasswordSecret, fuzzQuerySecret}
		if strings.ContainsAny(host, "?#") {
			// The fuzzed host moved "token=" into another parameter's value
			// or a fragment: the URL no longer has a token parameter.
			secrets = secrets[:3]
		}
		checkAccepted(t, cfg, inputs, secrets)
	})
}

// checkConfigError: every problem names a known variable, on one line, and
// quotes no credential the fuzzed values did not contain themselves.
func checkConfigError(t *testing.T, err error, inputs string) {
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("error %T is not a *config.Error: %v", err, err)
	}
	known := map[string]bool{}
	for _, v := range config.Variables() {
		known[v.Name] = true
	}
	for _, e := range cerr.Problems() {
		if name, ok := config.ProblemVariable(e); !ok || !known[name] {
			t.Errorf("problem %q does not name a known variable", e)
		}
		if strings.ContainsAny(e.Error(), "\r\n") {
			t.Errorf("problem %q spans several lines", e)
		}
	}
	noSecret(t, "error", err.Error(), inputs, fuzzHeaderSecret, fuzzTokenSecret, fuzzPasswordSecret, fuzzQuerySecret)
}

// checkAccepted: the configuration builds a proxy, and the URL as logged
// hides its credentials.
func checkAccepted(t *testing.T, cfg config.Config, inputs string, secrets []string) {
	opts, err := proxyOptions(cfg, zap.NewNop())
	if err != nil {
		t.Fatalf("proxyOptions refused an accepted configuration: %v", err)
	}
	if _, err := proxy.New(opts); err != nil {
		t.Fatalf("proxy.New refused an accepted configuration: %v", err)
	}
	noSecret(t, "redacted URL", cfg.RedactedUpstreamURL(), inputs, secrets...)
}

// noSecret fails when s quotes one of secrets that the fuzzed inputs did not
// contain themselves.
func noSecret(t *testing.T, what, s, inputs string, secrets ...string) {
	for _, secret := range secrets {
		if strings.Contains(s, secret) && !strings.Contains(inputs, secret) {
			t.Errorf("%s quotes the credential %q: %s", what, secret, s)
		}
	}
}
