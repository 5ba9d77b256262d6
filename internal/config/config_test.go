package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// loadErrLines loads env, requires a *Error and returns its problems,
// one per line.
func loadErrLines(t *testing.T, environ map[string]string) []string {
	t.Helper()
	_, err := Load(environ)
	if err == nil {
		t.Fatalf("Load(%v) succeeded, want an error", environ)
	}
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("error %T is not a *Error: %v", err, err)
	}
	return strings.Split(cerr.Err.Error(), "\n")
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := Load(configtest.WithURL(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"UpstreamURL", cfg.UpstreamURL.String(), configtest.Upstream},
		{"Listen", cfg.Listen, ListenList{{Kind: proxy.ListenerWS, Addr: "127.0.0.1:8080", Pos: 1}}},
		{"TCPBinary", cfg.TCPBinary, proxy.BinaryBase64},
		{"TCPNewline", cfg.TCPNewline, proxy.NewlineSpace},
		{"UnixSocketMode", cfg.UnixSocketMode, SocketMode(0o600)},
		{"AdminListen", cfg.AdminListen, AdminAddr("127.0.0.1:9090")},
		{"ForwardPath", cfg.ForwardPath, false},
		{"Header", len(cfg.Header()), 0},
		{"UpstreamTokenFile", cfg.UpstreamTokenFile, ""},
		{"DialTimeout", cfg.DialTimeout, 10 * time.Second},
		{"AcceptWait", cfg.AcceptWait, 2 * time.Second},
		{"BackoffBase", cfg.BackoffBase, 500 * time.Millisecond},
		{"BackoffCap", cfg.BackoffCap, 30 * time.Second},
		{"BackoffJitter", cfg.BackoffJitter, upstream.JitterFull},
		{"StableAfter", cfg.StableAfter, 10 * time.Second},
		{"ConfirmMatch", cfg.ConfirmMatch == nil, true},
		{"RestartFloor", cfg.RestartFloor, 5 * time.Second},
		{"TryAgainFloor", cfg.TryAgainFloor, 15 * time.Second},
		{"MaxAttempts", cfg.MaxAttempts, 0},
		{"AuthFailuresMax", cfg.AuthFailuresMax, 3},
		{"PermanentCodes", cfg.PermanentCodes.String(), mustCodeSet(t, upstream.DefaultPermanentCodes).String()},
		{"ReauthCodes", cfg.ReauthCodes.String(), mustCodeSet(t, upstream.DefaultReauthCodes).String()},
		{"PingInterval", cfg.PingInterval, 15 * time.Second},
		{"PingTimeout", cfg.PingTimeout, 10 * time.Second},
		{"HeartbeatMessage", cfg.HeartbeatMessage, ""},
		{"HeartbeatReplyMatch", cfg.HeartbeatReplyMatch == nil, true},
		{"OutboxMaxMessages", cfg.OutboxMaxMessages, 10000},
		{"OutboxMaxBytes", cfg.OutboxMaxBytes, 8 * MiB},
		{"OutboxOverflow", cfg.OutboxOverflow, buffer.OverflowClose},
		{"MaxSessions", cfg.MaxSessions, 1024},
		{"MaxMessageBytes", cfg.MaxMessageBytes, 16 * MiB},
		{"DownstreamBufferBytes", cfg.DownstreamBufferBytes, 16 * MiB},
		{"DrainTimeout", cfg.DrainTimeout, 10 * time.Second},
		{"LogLevel", cfg.LogLevel, "info"},
		{"LogFormat", cfg.LogFormat, "json"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if tc, err := cfg.TLSConfig(); err != nil || tc == nil || tc.MinVersion != tls.VersionTLS12 || tc.RootCAs != nil {
		t.Errorf("TLSConfig() = %+v, %v; want TLS 1.2+ with system roots", tc, err)
	}
}

func mustCodeSet(t *testing.T, s string) upstream.CodeSet {
	t.Helper()
	cs, err := upstream.ParseCodeSet(s)
	if err != nil {
		t.Fatalf("ParseCodeSet(%q): %v", s, err)
	}
	return cs
}

// The struct tags must spell the package defaults: a tag cannot reference a
// constant, so this test is what keeps them in step.
func TestCodeDefaultsMatchUpstream(t *testing.T) {
	for field, want := range map[string]string{
		"PermanentCodes": upstream.DefaultPermanentCodes,
		"ReauthCodes":    upstream.DefaultReauthCodes,
	} {
		f, _ := reflect.TypeFor[Config]().FieldByName(field)
		if got := f.Tag.Get("envDefault"); got != want {
			t.Errorf("%s envDefault = %q, want %q", field, got, want)
		}
	}
}

func TestLoadConfigValues(t *testing.T) {
	cfg, err := Load(configtest.WithURL(map[string]string{
		"TETHER_LISTEN":           "ws://127.0.0.1:0",
		"TETHER_ADMIN_LISTEN":     "off",
		"TETHER_BACKOFF_JITTER":   "decorrelated",
		"TETHER_OUTBOX_OVERFLOW":  "drop-oldest",
		"TETHER_OUTBOX_MAX_BYTES": "1GiB",
		"TETHER_PING_INTERVAL":    "0",
		"TETHER_PING_TIMEOUT":     "0",
		"TETHER_CONFIRM_MATCH":    `{"t":"welcome"}`,
		"TETHER_PERMANENT_CODES":  "1002,4500-4999",
		"TETHER_REAUTH_CODES":     " ",
		"TETHER_MAX_ATTEMPTS":     "",
		"TETHER_UPSTREAM_HEADERS": "X-Api-Key: k1\nAccept: a, b",
		"TETHER_LOG_FORMAT":       "console",
		"TETHER_LOG_LEVEL":        "debug",
	}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Listen.String() != "ws://127.0.0.1:0" || cfg.AdminListen != "" {
		t.Errorf("Listen=%q AdminListen=%q, want 127.0.0.1:0 and disabled", cfg.Listen, cfg.AdminListen)
	}
	if cfg.BackoffJitter != upstream.JitterDecorrelated || cfg.OutboxOverflow != buffer.OverflowDropOldest {
		t.Errorf("jitter=%v overflow=%v", cfg.BackoffJitter, cfg.OutboxOverflow)
	}
	if cfg.OutboxMaxBytes != GiB || cfg.PingInterval != 0 {
		t.Errorf("OutboxMaxBytes=%v PingInterval=%v", cfg.OutboxMaxBytes, cfg.PingInterval)
	}
	if cfg.ConfirmMatch == nil || !cfg.PermanentCodes.Contains(4711) || cfg.PermanentCodes.Contains(1003) {
		t.Errorf("ConfirmMatch=%v PermanentCodes=%v", cfg.ConfirmMatch, cfg.PermanentCodes)
	}
	if cfg.ReauthCodes.String() != "" || cfg.MaxAttempts != 0 {
		t.Errorf("ReauthCodes=%q (blank means none), MaxAttempts=%d (empty means default)", cfg.ReauthCodes, cfg.MaxAttempts)
	}
	want := http.Header{"X-Api-Key": {"k1"}, "Accept": {"a, b"}}
	if got := cfg.Header(); !reflect.DeepEqual(got, want) {
		t.Errorf("Header() = %v, want %v", got, want)
	}
	if tc, err := cfg.TLSConfig(); err != nil || tc == nil {
		t.Errorf("TLSConfig() for wss:// = %v, %v; want a config", tc, err)
	}
}

// Packages never read the process environment: a nil map is an empty one.
func TestLoadConfigIgnoresProcessEnvironment(t *testing.T) {
	t.Setenv("TETHER_UPSTREAM_URL", configtest.Upstream)
	if _, err := Load(nil); err == nil || !strings.Contains(err.Error(), "TETHER_UPSTREAM_URL: required, not set") {
		t.Errorf("Load(nil) error = %v, want TETHER_UPSTREAM_URL not set", err)
	}
}

func TestLoadConfigNamesEachInvalidVariable(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "TETHER_UPSTREAM_URL: required, not set"},
		{map[string]string{"TETHER_UPSTREAM_URL": ""}, "TETHER_UPSTREAM_URL: required, must not be empty"},
		{map[string]string{"TETHER_UPSTREAM_URL": "ftp://x.example"}, `TETHER_UPSTREAM_URL: scheme must be ws or wss (WebSocket), http or https (SSE), got "ftp"`},
		{map[string]string{"TETHER_UPSTREAM_URL": "ws://"}, "TETHER_UPSTREAM_URL: missing host"},
		{map[string]string{"TETHER_UPSTREAM_URL": "ws://h/#frag"}, "TETHER_UPSTREAM_URL: must not contain a #fragment"},
		{configtest.WithURL(map[string]string{"TETHER_LISTEN": "tcp://127.0.0.1:9000/x"}), `TETHER_LISTEN: entry 1 "tcp://127.0.0.1:9000/x": a listener takes no path or query`},
		{configtest.WithURL(map[string]string{"TETHER_LISTEN": "unix://run/t.sock"}), `TETHER_LISTEN: entry 1 "unix://run/t.sock": socket path "run/t.sock" is not absolute`},
		{configtest.WithURL(map[string]string{"TETHER_LISTEN": "http://127.0.0.1:1"}), `TETHER_LISTEN: entry 1 "http://127.0.0.1:1": unknown scheme "http"`},
		{configtest.WithURL(map[string]string{"TETHER_LISTEN": "8080"}), `TETHER_LISTEN: entry 1 "8080": invalid address "8080"`},
		{configtest.WithURL(map[string]string{"TETHER_LISTEN": "127.0.0.1:99999"}), `TETHER_LISTEN: entry 1 "127.0.0.1:99999": invalid port "99999"`},
		{configtest.WithURL(map[string]string{"TETHER_LISTEN": "127.0.0.1:8080,127.0.0.1:8080"}), `TETHER_LISTEN: entry 2 "ws://127.0.0.1:8080" repeats entry 1`},
		{configtest.WithURL(map[string]string{"TETHER_TCP_BINARY": "hex"}), "TETHER_TCP_BINARY: "},
		{configtest.WithURL(map[string]string{"TETHER_TCP_NEWLINE": "escape"}), "TETHER_TCP_NEWLINE: "},
		{configtest.WithURL(map[string]string{"TETHER_UNIX_SOCKET_MODE": "0444"}), `TETHER_UNIX_SOCKET_MODE: file mode "0444" lets no one connect`},
		{configtest.WithURL(map[string]string{"TETHER_FORWARD_PATH": "maybe"}), "TETHER_FORWARD_PATH: "},
		{configtest.WithURL(map[string]string{"TETHER_ADMIN_LISTEN": "no"}), `TETHER_ADMIN_LISTEN: invalid address "no": use host:port (or off)`},
		{configtest.WithURL(map[string]string{"TETHER_UPSTREAM_HEADERS": "X Bad: secret-value"}), `TETHER_UPSTREAM_HEADERS: entry 1: invalid header name "X Bad"`},
		{configtest.WithURL(map[string]string{"TETHER_UPSTREAM_TOKEN_FILE": "/nonexistent/token"}), "TETHER_UPSTREAM_TOKEN_FILE: cannot read"},
		{configtest.WithURL(map[string]string{"TETHER_UPSTREAM_CERT_FILE": "/x.pem"}), "TETHER_UPSTREAM_KEY_FILE: required when TETHER_UPSTREAM_CERT_FILE is set"},
		{configtest.WithURL(map[string]string{"TETHER_UPSTREAM_KEY_FILE": "/x.pem"}), "TETHER_UPSTREAM_CERT_FILE: required when TETHER_UPSTREAM_KEY_FILE is set"},
		{configtest.WithURL(map[string]string{"TETHER_UPSTREAM_CA_FILE": "/nonexistent/ca.pem"}), "TETHER_UPSTREAM_CA_FILE: cannot read"},
		{configtest.WithURL(map[string]string{"TETHER_DIAL_TIMEOUT": "ten"}), `TETHER_DIAL_TIMEOUT: invalid duration "ten"`},
		{configtest.WithURL(map[string]string{"TETHER_DIAL_TIMEOUT": "0s"}), `TETHER_DIAL_TIMEOUT: must be > 0, got "0s"`},
		{configtest.WithURL(map[string]string{"TETHER_ACCEPT_WAIT": "-1s"}), `TETHER_ACCEPT_WAIT: must be ≥ 0, got "-1s"`},
		{configtest.WithURL(map[string]string{"TETHER_BACKOFF_BASE": "-1s"}), `TETHER_BACKOFF_BASE: must be > 0, got "-1s"`},
		{configtest.WithURL(map[string]string{"TETHER_BACKOFF_CAP": "100ms"}), `TETHER_BACKOFF_CAP: must be ≥ TETHER_BACKOFF_BASE (500ms), got "100ms"`},
		{configtest.WithURL(map[string]string{"TETHER_BACKOFF_JITTER": "half"}), `TETHER_BACKOFF_JITTER: unknown jitter "half"`},
		{configtest.WithURL(map[string]string{"TETHER_STABLE_AFTER": "0s"}), `TETHER_STABLE_AFTER: must be > 0, got "0s"`},
		{configtest.WithURL(map[string]string{"TETHER_CONFIRM_MATCH": `{"t":`}), "TETHER_CONFIRM_MATCH: "},
		{configtest.WithURL(map[string]string{"TETHER_RESTART_FLOOR": "-5s"}), `TETHER_RESTART_FLOOR: must be ≥ 0, got "-5s"`},
		{configtest.WithURL(map[string]string{"TETHER_TRY_AGAIN_FLOOR": "-5s"}), `TETHER_TRY_AGAIN_FLOOR: must be ≥ 0, got "-5s"`},
		{configtest.WithURL(map[string]string{"TETHER_MAX_ATTEMPTS": "-1"}), "TETHER_MAX_ATTEMPTS: must be ≥ 0 (0 retries forever), got -1"},
		{configtest.WithURL(map[string]string{"TETHER_MAX_ATTEMPTS": "many"}), `TETHER_MAX_ATTEMPTS: invalid integer "many"`},
		{configtest.WithURL(map[string]string{"TETHER_AUTH_FAILURES_MAX": "0"}), "TETHER_AUTH_FAILURES_MAX: must be ≥ 1, got 0"},
		{configtest.WithURL(map[string]string{"TETHER_PERMANENT_CODES": "10x"}), "TETHER_PERMANENT_CODES: "},
		{configtest.WithURL(map[string]string{"TETHER_REAUTH_CODES": "1008", "TETHER_PERMANENT_CODES": "1008"}), "TETHER_REAUTH_CODES: code 1008 is also in TETHER_PERMANENT_CODES"},
		{configtest.WithURL(map[string]string{"TETHER_PERMANENT_CODES": "1002,1006"}), `TETHER_PERMANENT_CODES: "1006": never sent in a close frame`},
		{configtest.WithURL(map[string]string{"TETHER_PING_INTERVAL": "-1s"}), `TETHER_PING_INTERVAL: must be ≥ 0, got "-1s"`},
		{configtest.WithURL(map[string]string{"TETHER_PING_TIMEOUT": "0s"}), `TETHER_PING_TIMEOUT: must be > 0 while TETHER_PING_INTERVAL is set, got "0s"`},
		{configtest.WithURL(map[string]string{"TETHER_HEARTBEAT_REPLY_MATCH": "re:("}), "TETHER_HEARTBEAT_REPLY_MATCH: "},
		{configtest.WithURL(map[string]string{"TETHER_OUTBOX_MAX_MESSAGES": "0"}), "TETHER_OUTBOX_MAX_MESSAGES: must be > 0, got 0"},
		{configtest.WithURL(map[string]string{"TETHER_OUTBOX_MAX_BYTES": "0"}), `TETHER_OUTBOX_MAX_BYTES: must be > 0, got "0B"`},
		{configtest.WithURL(map[string]string{"TETHER_OUTBOX_MAX_BYTES": "8MB"}), `TETHER_OUTBOX_MAX_BYTES: invalid size "8MB": use a number with an optional KiB, MiB or GiB suffix`},
		{configtest.WithURL(map[string]string{"TETHER_OUTBOX_OVERFLOW": "block"}), "TETHER_OUTBOX_OVERFLOW: "},
		{configtest.WithURL(map[string]string{"TETHER_MAX_SESSIONS": "0"}), "TETHER_MAX_SESSIONS: must be > 0, got 0"},
		{configtest.WithURL(map[string]string{"TETHER_MAX_MESSAGE_BYTES": "2GiB"}), `TETHER_MAX_MESSAGE_BYTES: must be ≤ 1GiB, got "2GiB"`},
		{configtest.WithURL(map[string]string{"TETHER_MAX_MESSAGE_BYTES": "0"}), `TETHER_MAX_MESSAGE_BYTES: must be > 0, got "0B"`},
		{configtest.WithURL(map[string]string{"TETHER_DOWNSTREAM_BUFFER_BYTES": "0KiB"}), `TETHER_DOWNSTREAM_BUFFER_BYTES: must be > 0, got "0B"`},
		{configtest.WithURL(map[string]string{"TETHER_DRAIN_TIMEOUT": "-1s"}), `TETHER_DRAIN_TIMEOUT: must be ≥ 0, got "-1s"`},
		{configtest.WithURL(map[string]string{"TETHER_LOG_LEVEL": "trace"}), `TETHER_LOG_LEVEL: invalid log level "trace"`},
		{configtest.WithURL(map[string]string{"TETHER_LOG_FORMAT": "xml"}), `TETHER_LOG_FORMAT: invalid log format "xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			lines := loadErrLines(t, tt.env)
			if len(lines) != 1 || !strings.HasPrefix(lines[0], tt.want) {
				t.Errorf("problems = %q, want exactly one starting with %q", lines, tt.want)
			}
		})
	}
}

func TestLoadConfigReportsAllProblemsAtOnce(t *testing.T) {
	_, err := Load(map[string]string{
		"TETHER_DIAL_TIMEOUT":    "ten",
		"TETHER_BACKOFF_BASE":    "-1s",
		"TETHER_MAX_SESSIONS":    "0",
		"TETHER_UPSTREM_URL":     "ws://x",
		"TETHER_OUTBOX_OVERFLOW": "block",
	})
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("Load error = %v, want *Error", err)
	}
	want := []string{
		"TETHER_UPSTREAM_URL: required, not set",
		`TETHER_DIAL_TIMEOUT: invalid duration "ten"`,
		`TETHER_BACKOFF_BASE: must be > 0, got "-1s"`,
		"TETHER_OUTBOX_OVERFLOW: ",
		"TETHER_MAX_SESSIONS: must be > 0, got 0",
		"TETHER_UPSTREM_URL: unknown variable (did you mean TETHER_UPSTREAM_URL?)",
	}
	lines := strings.Split(cerr.Err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(lines), len(want), cerr.Err)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, lines[i], want[i])
		}
	}
	var first *problem
	if !errors.As(err, &first) || first.name != "TETHER_UPSTREAM_URL" {
		t.Errorf("errors.As(*problem) through Error = %v", first)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "invalid configuration:\n  TETHER_UPSTREAM_URL") {
		t.Errorf("Error() = %q, want a header then one indented line per problem", msg)
	}
}

// TestPairsReportEachVariable: each variable of a related pair is checked on
// its own, so two mistakes give two lines, whether the first one failed to
// parse or to validate; and a negative ping timeout is refused although the
// heartbeat is off.
func TestPairsReportEachVariable(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"TETHER_BACKOFF_BASE": "abc", "TETHER_BACKOFF_CAP": "-1s"},
			[]string{`TETHER_BACKOFF_BASE: invalid duration "abc"`, `TETHER_BACKOFF_CAP: must be > 0, got "-1s"`}},
		{map[string]string{"TETHER_BACKOFF_BASE": "-1s", "TETHER_BACKOFF_CAP": "-2s"},
			[]string{`TETHER_BACKOFF_BASE: must be > 0, got "-1s"`, `TETHER_BACKOFF_CAP: must be > 0, got "-2s"`}},
		{map[string]string{"TETHER_BACKOFF_BASE": "abc", "TETHER_BACKOFF_CAP": "1s"},
			[]string{`TETHER_BACKOFF_BASE: invalid duration "abc"`}},
		{map[string]string{"TETHER_PING_INTERVAL": "abc", "TETHER_PING_TIMEOUT": "-1s"},
			[]string{`TETHER_PING_INTERVAL: invalid duration "abc"`, `TETHER_PING_TIMEOUT: must be ≥ 0, got "-1s"`}},
		{map[string]string{"TETHER_PING_INTERVAL": "-1s", "TETHER_PING_TIMEOUT": "-1s"},
			[]string{`TETHER_PING_INTERVAL: must be ≥ 0, got "-1s"`, `TETHER_PING_TIMEOUT: must be ≥ 0, got "-1s"`}},
		{map[string]string{"TETHER_PING_INTERVAL": "0", "TETHER_PING_TIMEOUT": "-1s"},
			[]string{`TETHER_PING_TIMEOUT: must be ≥ 0, got "-1s"`}},
		{map[string]string{"TETHER_PING_INTERVAL": "1s", "TETHER_PING_TIMEOUT": "0s"},
			[]string{`TETHER_PING_TIMEOUT: must be > 0 while TETHER_PING_INTERVAL is set, got "0s"`}},
		{map[string]string{"TETHER_PING_INTERVAL": "1s", "TETHER_PING_TIMEOUT": "-1s"},
			[]string{`TETHER_PING_TIMEOUT: must be > 0 while TETHER_PING_INTERVAL is set, got "-1s"`}},
	}
	for _, tt := range tests {
		lines := loadErrLines(t, configtest.WithURL(tt.env))
		if len(lines) != len(tt.want) {
			t.Errorf("%v: problems %q, want %d: %q", tt.env, lines, len(tt.want), tt.want)
			continue
		}
		for i, want := range tt.want {
			if !strings.HasPrefix(lines[i], want) {
				t.Errorf("%v: problem %d = %q, want prefix %q", tt.env, i, lines[i], want)
			}
		}
	}
	if _, err := Load(configtest.WithURL(map[string]string{"TETHER_PING_INTERVAL": "0", "TETHER_PING_TIMEOUT": "0s"})); err != nil {
		t.Errorf("heartbeat off with a zero timeout: %v, want accepted", err)
	}
}

// TestCodeLists: a close-code list that is set wins over the other list's
// default for the codes they share, and set empty means no codes (not the
// default, as for other variables); two lists set with a common code are
// refused.
func TestCodeLists(t *testing.T) {
	tests := []struct {
		name              string
		env               map[string]string
		permanent, reauth string // String() of each list
	}{
		{"defaults", nil, "1002-1003,1007-1010", "4001,4003"},
		{"permanent over the reauth default", map[string]string{"TETHER_PERMANENT_CODES": "4000-4999"}, "4000-4999", ""},
		{"permanent sharing one code", map[string]string{"TETHER_PERMANENT_CODES": "1002,4003"}, "1002,4003", "4001"},
		{"reauth over the permanent default", map[string]string{"TETHER_REAUTH_CODES": "1008,4001"}, "1002-1003,1007,1009-1010", "1008,4001"},
		{"reauth set empty", map[string]string{"TETHER_REAUTH_CODES": ""}, "1002-1003,1007-1010", ""},
		{"permanent set empty", map[string]string{"TETHER_PERMANENT_CODES": ""}, "", "4001,4003"},
		{"blank as before", map[string]string{"TETHER_PERMANENT_CODES": " ", "TETHER_REAUTH_CODES": " "}, "", ""},
		{"both set apart", map[string]string{"TETHER_PERMANENT_CODES": "4000-4099", "TETHER_REAUTH_CODES": "4401"}, "4000-4099", "4401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(configtest.WithURL(tt.env))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := cfg.PermanentCodes.String(); got != tt.permanent {
				t.Errorf("permanent codes %q, want %q", got, tt.permanent)
			}
			if got := cfg.ReauthCodes.String(); got != tt.reauth {
				t.Errorf("reauth codes %q, want %q", got, tt.reauth)
			}
		})
	}
	lines := loadErrLines(t, configtest.WithURL(map[string]string{"TETHER_PERMANENT_CODES": "4000-4999", "TETHER_REAUTH_CODES": "4001"}))
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "TETHER_REAUTH_CODES: code 4001 is also in TETHER_PERMANENT_CODES") {
		t.Errorf("both lists set with a common code: problems %q", lines)
	}
}

// A variable that failed to parse must not also fail a check that read its
// zero value: one mistake, one line.
func TestParseFailureSuppressesDependentChecks(t *testing.T) {
	lines := loadErrLines(t, configtest.WithURL(map[string]string{
		"TETHER_BACKOFF_CAP":     "soon",
		"TETHER_PING_INTERVAL":   "often",
		"TETHER_PERMANENT_CODES": "x",
	}))
	if len(lines) != 3 {
		t.Errorf("problems = %q, want 3 (one per variable)", lines)
	}
}

func TestUnknownVariables(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string // "" when the variable must be ignored
	}{
		{"TETHER_UPSTREM_URL", "TETHER_UPSTREM_URL: unknown variable (did you mean TETHER_UPSTREAM_URL?)"},
		{"TETHER_PING_INTERVALS", "TETHER_PING_INTERVALS: unknown variable (did you mean TETHER_PING_INTERVAL?)"},
		{"TETHER_FROBNICATE", "TETHER_FROBNICATE: unknown variable"},
		// Shaped like a service link, but no Service "tether-listen" exists.
		{"TETHER_LISTEN_PORT", "TETHER_LISTEN_PORT: unknown variable"},
		{"TETHERX", ""},
		{"HOME", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(configtest.WithURL(map[string]string{tt.name: "x"}))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Load: %v, want the variable ignored", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Load error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// Kubernetes injects these for Services named tether and tether-admin when
// enableServiceLinks is on (the default); they must not stop the pod.
func TestServiceLinksIgnored(t *testing.T) {
	links := map[string]string{
		"TETHER_SERVICE_HOST":              "10.0.0.1",
		"TETHER_SERVICE_PORT":              "8080",
		"TETHER_SERVICE_PORT_HTTP":         "8080",
		"TETHER_PORT":                      "tcp://10.0.0.1:8080",
		"TETHER_PORT_8080_TCP":             "tcp://10.0.0.1:8080",
		"TETHER_PORT_8080_TCP_PROTO":       "tcp",
		"TETHER_PORT_8080_TCP_PORT":        "8080",
		"TETHER_PORT_8080_TCP_ADDR":        "10.0.0.1",
		"TETHER_ADMIN_SERVICE_HOST":        "10.0.0.2",
		"TETHER_ADMIN_SERVICE_PORT":        "9090",
		"TETHER_ADMIN_PORT":                "tcp://10.0.0.2:9090",
		"TETHER_ADMIN_PORT_9090_TCP_PROTO": "tcp",
	}
	if _, err := Load(configtest.WithURL(links)); err != nil {
		t.Errorf("Load with service links: %v", err)
	}
}

// Secrets in the URL or in header values must never reach an error message,
// which main prints to stderr and Kubernetes keeps in the pod's events.
func TestErrorsDoNotEchoSecrets(t *testing.T) {
	const secret = "s3cr3t-value"
	envs := []map[string]string{
		{"TETHER_UPSTREAM_URL": "ftp://user:" + secret + "@h/?token=" + secret},
		{"TETHER_UPSTREAM_URL": "https://user:" + secret + "@h/?token=" + secret + "#frag"},
		{"TETHER_UPSTREAM_URL": "ws://user:" + secret + "@h:port/"},
		{"TETHER_UPSTREAM_URL": "ws://h/%zz?token=" + secret},
		configtest.WithURL(map[string]string{"TETHER_UPSTREAM_HEADERS": "Authorization: Bearer " + secret + "\nX Bad: " + secret}),
		configtest.WithURL(map[string]string{"TETHER_UPSTREAM_HEADERS": "Authorization " + secret}),
		configtest.WithURL(map[string]string{"TETHER_UPSTREAM_HEADERS": "Sec-WebSocket-Protocol: " + secret}),
		configtest.WithURL(map[string]string{"TETHER_UPSTREAM_HEADERS": "X-Key: " + secret + "\x00"}),
	}
	for _, e := range envs {
		_, err := Load(e)
		if err == nil {
			t.Errorf("Load(%q) succeeded, want an error", e)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error echoes the secret: %v", err)
		}
	}
}

func TestHeaderParsing(t *testing.T) {
	tests := []struct {
		in      string
		want    http.Header
		wantErr string
	}{
		{in: "X-Api-Key: abc", want: http.Header{"X-Api-Key": {"abc"}}},
		{in: "x-api-key:abc", want: http.Header{"X-Api-Key": {"abc"}}},
		{in: "A: 1\nB: 2\r\n", want: http.Header{"A": {"1"}, "B": {"2"}}},
		{in: "A: 1, B: 2", want: http.Header{"A": {"1"}, "B": {"2"}}},
		{in: "Accept: a, b, C: 3", want: http.Header{"Accept": {"a, b"}, "C": {"3"}}},
		{in: "Cookie: a=1, b=2", want: http.Header{"Cookie": {"a=1, b=2"}}},
		{in: "X-A: 1\nX-A: 2", want: http.Header{"X-A": {"1", "2"}}},
		{in: "Authorization: Bearer a:b", want: http.Header{"Authorization": {"Bearer a:b"}}},
		{in: "\n  X: y  \n\n,", want: http.Header{"X": {"y"}}},
		{in: "A: 1,\nB: 2,", want: http.Header{"A": {"1"}, "B": {"2"}}},
		{in: "X-Empty:", want: http.Header{"X-Empty": {""}}},
		{in: "NoColon", wantErr: `entry 1: missing ":"`},
		{in: "A: 1\nX Bad: v", wantErr: `entry 2: invalid header name "X Bad"`},
		{in: ": v", wantErr: `entry 1: invalid header name ""`},
		{in: "Host: evil", wantErr: `entry 1: header "Host" is set by tether's WebSocket handshake`},
		{in: "sec-websocket-protocol: p", wantErr: `entry 1: header "Sec-Websocket-Protocol" is set by`},
		{in: "Upgrade: h2c", wantErr: `entry 1: header "Upgrade" is set by`},
		{in: "X-A: a\x01b", wantErr: `entry 1: header "X-A": value contains a control character`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var h headerList
			err := h.UnmarshalText([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want prefix %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("UnmarshalText: %v", err)
			}
			if !reflect.DeepEqual(h.header, tt.want) {
				t.Errorf("header = %v, want %v", h.header, tt.want)
			}
		})
	}
}

func TestHeaderConflictsWithTokenFile(t *testing.T) {
	token := writeFile(t, "token", "abc\n")
	lines := loadErrLines(t, configtest.WithURL(map[string]string{
		"TETHER_UPSTREAM_TOKEN_FILE": token,
		"TETHER_UPSTREAM_HEADERS":    "Authorization: Basic eA==",
	}))
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "TETHER_UPSTREAM_HEADERS: sets Authorization") {
		t.Errorf("problems = %q", lines)
	}
}

// TestUserinfoConflictsWithAuthorization: credentials in the URL's userinfo
// are sent as Basic auth, so they cannot go with another Authorization:
// tether would have to pick one silently.
func TestUserinfoConflictsWithAuthorization(t *testing.T) {
	token := writeFile(t, "token", "abc\n")
	for _, url := range []string{"wss://u:hunter2@feed.example.com/v1", "https://s3kr1t@feed.example.com/events"} {
		for name, extra := range map[string]map[string]string{
			"token file": {"TETHER_UPSTREAM_TOKEN_FILE": token},
			"header":     {"TETHER_UPSTREAM_HEADERS": "Authorization: Basic eA=="},
		} {
			extra["TETHER_UPSTREAM_URL"] = url
			lines := loadErrLines(t, extra)
			want := "TETHER_UPSTREAM_URL: has userinfo, which tether sends as Basic auth, and "
			if len(lines) != 1 || !strings.HasPrefix(lines[0], want) || strings.Contains(lines[0], "hunter2") || strings.Contains(lines[0], "s3kr1t") {
				t.Errorf("%s with %s: problems = %q, want one starting %q, without the credentials", url, name, lines, want)
			}
		}
		if _, err := Load(map[string]string{"TETHER_UPSTREAM_URL": url}); err != nil {
			t.Errorf("%s alone: %v, want it accepted (sent as Basic auth)", url, err)
		}
	}
}

func TestTokenFile(t *testing.T) {
	good := writeFile(t, "token", "  abc\n")
	empty := writeFile(t, "empty", " \n")
	if _, err := Load(configtest.WithURL(map[string]string{"TETHER_UPSTREAM_TOKEN_FILE": good})); err != nil {
		t.Errorf("readable token file: %v", err)
	}
	lines := loadErrLines(t, configtest.WithURL(map[string]string{"TETHER_UPSTREAM_TOKEN_FILE": empty}))
	if !strings.HasPrefix(lines[0], "TETHER_UPSTREAM_TOKEN_FILE: file ") || !strings.HasSuffix(lines[0], "is empty") {
		t.Errorf("problems = %q", lines)
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		str     string
		wantErr bool
	}{
		{in: "0", want: 0, str: "0B"},
		{in: "1048576", want: MiB, str: "1MiB"},
		{in: "512B", want: 512, str: "512B"},
		{in: "1000", want: 1000, str: "1000B"},
		{in: "1536", want: 1536, str: "1536B"},
		{in: "64KiB", want: 64 * KiB, str: "64KiB"},
		{in: "1024KiB", want: MiB, str: "1MiB"},
		{in: "8MiB", want: 8 * MiB, str: "8MiB"},
		{in: "3GiB", want: 3 * GiB, str: "3GiB"},
		{in: "2048MiB", want: 2 * GiB, str: "2GiB"},
		{in: " 8MiB ", want: 8 * MiB, str: "8MiB"},
		{in: "8MB", wantErr: true},
		{in: "8mib", wantErr: true},
		{in: "8 MiB", wantErr: true},
		{in: "1.5MiB", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "", wantErr: true},
		{in: "0x10", wantErr: true},
		{in: "9223372036854775807GiB", wantErr: true},
		{in: "99999999999999999999", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s ByteSize
			err := s.UnmarshalText([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("UnmarshalText(%q) = %v, want an error", tt.in, s)
				}
				if !strings.HasPrefix(err.Error(), `invalid size "`+tt.in+`"`) {
					t.Errorf("error = %q, want it to quote the value", err)
				}
				return
			}
			if err != nil || s != tt.want || s.String() != tt.str {
				t.Fatalf("UnmarshalText(%q) = %d (%s), %v; want %d (%s)", tt.in, s, s, err, tt.want, tt.str)
			}
			var back ByteSize
			if err := back.UnmarshalText([]byte(s.String())); err != nil || back != s {
				t.Errorf("round trip of %s = %d, %v", s, back, err)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"wss://feed.example.com/v1", "wss://feed.example.com/v1"},
		{"wss://u:pw@h/x", "wss://u:REDACTED@h/x"},
		{"wss://tok3n@h/x", "wss://REDACTED@h/x"},
		{"wss://h/x?token=abc&channel=a", "wss://h/x?token=REDACTED&channel=a"},
		{"wss://h/?channel=a&Access_Token=abc&sig=1&API_KEY=2", "wss://h/?channel=a&Access_Token=REDACTED&sig=REDACTED&API_KEY=REDACTED"},
		{"wss://h/?auth=1&key=2&apikey=3&secret=4&password=5&signature=6", "wss://h/?auth=REDACTED&key=REDACTED&apikey=REDACTED&secret=REDACTED&password=REDACTED&signature=REDACTED"},
		{"wss://h/?X-Amz-Signature=1&client_secret=2&auth_token=3", "wss://h/?X-Amz-Signature=REDACTED&client_secret=REDACTED&auth_token=REDACTED"},
		{"wss://h/?to%6Ben=abc", "wss://h/?to%6Ben=REDACTED"},
		{"wss://h/?token", "wss://h/?token=REDACTED"},
		{"wss://h/?channel=a&symbol=b&limit=3", "wss://h/?channel=a&symbol=b&limit=3"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := redactURL(u); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if u.String() != tt.in {
			t.Errorf("redactURL modified its argument: %q", u)
		}
	}
	cfg, err := Load(map[string]string{"TETHER_UPSTREAM_URL": "wss://u:pw@h/?token=t"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.RedactedUpstreamURL(); got != "wss://u:REDACTED@h/?token=REDACTED" {
		t.Errorf("RedactedUpstreamURL() = %q", got)
	}
	if got := redactURL(nil); got != "" {
		t.Errorf("redactURL(nil) = %q", got)
	}
}

// TestSecretNames: the redaction rule over the names services use for
// credentials in a query string, header names among them (X-Api-Key,
// Authorization), in the spellings they come in; and names that carry
// nothing secret, which stay readable.
func TestSecretNames(t *testing.T) {
	secret := []string{
		"token", "access_token", "refresh_token", "id_token", "accessToken", "X-Auth-Token", "oauth_token",
		"key", "api_key", "api-key", "apiKey", "apikey", "APIKEY", "X-API-Key", "private_key", "privateKey",
		"auth_key", "access_key", "X-Amz-Security-Token", "subscription-key", "Ocp-Apim-Subscription-Key",
		"auth", "authorization", "Authorization", "Proxy-Authorization", "authToken", "X-Auth",
		"password", "passwd", "pass", "passphrase", "pwd", "PWD", "user_pwd",
		"secret", "client_secret", "clientSecret", "credential", "credentials", "X-Amz-Credential", "X-Goog-Credential",
		"jwt", "JWT", "id_jwt", "signature", "X-Amz-Signature", "X-Goog-Signature", "oauth_signature", "sig", "x-sig", "sig_v2",
		"session", "session_id", "sessionid", "SessionToken", "PHPSESSID", "JSESSIONID", "sid",
		"cookie", "Cookie", "bearer", "hmac", "otp", "ticket",
	}
	for _, name := range secret {
		if !isSecretName(name) {
			t.Errorf("isSecretName(%q) = false, want true", name)
		}
		u, err := url.Parse("wss://h/v1?channel=a&" + url.QueryEscape(name) + "=s3kr1t")
		if err != nil {
			t.Fatal(err)
		}
		if got := redactURL(u); strings.Contains(got, "s3kr1t") || !strings.Contains(got, "channel=a") {
			t.Errorf("redactURL with %q = %q, want its value redacted and channel=a kept", name, got)
		}
	}
	for _, name := range []string{"channel", "symbol", "limit", "page", "format", "v", "lang", "stream", "id", "user", "region", "since", "signal", "design", "consider"} {
		if isSecretName(name) {
			t.Errorf("isSecretName(%q) = true, want false: nothing secret in it", name)
		}
	}
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	caPEM, certPEM, keyPEM := newTestPKI(t)
	ca := writeFileIn(t, dir, "ca.pem", caPEM)
	cert := writeFileIn(t, dir, "cert.pem", certPEM)
	key := writeFileIn(t, dir, "key.pem", keyPEM)

	cfg, err := Load(configtest.WithURL(map[string]string{
		"TETHER_UPSTREAM_CA_FILE":   ca,
		"TETHER_UPSTREAM_CERT_FILE": cert,
		"TETHER_UPSTREAM_KEY_FILE":  key,
	}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	tc, err := cfg.TLSConfig()
	if err != nil {
		t.Fatalf("TLSConfig: %v", err)
	}
	if tc.MinVersion != tls.VersionTLS12 || tc.RootCAs == nil || len(tc.Certificates) != 1 {
		t.Fatalf("TLSConfig = %+v, want TLS 1.2+, RootCAs and one certificate", tc)
	}
	// The pool must verify a certificate the CA signed and nothing else.
	leaf, err := x509.ParseCertificate(tc.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	opts := x509.VerifyOptions{Roots: tc.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if _, err := leaf.Verify(opts); err != nil {
		t.Errorf("leaf does not verify against the configured CA: %v", err)
	}

	t.Run("ws without files", func(t *testing.T) {
		plain, err := Load(map[string]string{"TETHER_UPSTREAM_URL": "ws://h"})
		if err != nil {
			t.Fatal(err)
		}
		if tc, err := plain.TLSConfig(); tc != nil || err != nil {
			t.Errorf("TLSConfig() = %v, %v; want nil, nil", tc, err)
		}
	})
	t.Run("not PEM", func(t *testing.T) {
		lines := loadErrLines(t, configtest.WithURL(map[string]string{"TETHER_UPSTREAM_CA_FILE": filepath.Join(dir, "nope.pem")}))
		if !strings.HasPrefix(lines[0], "TETHER_UPSTREAM_CA_FILE: cannot read") {
			t.Errorf("problems = %q", lines)
		}
		garbage := writeFileIn(t, dir, "garbage.pem", []byte("not a certificate"))
		lines = loadErrLines(t, configtest.WithURL(map[string]string{"TETHER_UPSTREAM_CA_FILE": garbage}))
		if !strings.HasPrefix(lines[0], "TETHER_UPSTREAM_CA_FILE: no PEM certificate found") {
			t.Errorf("problems = %q", lines)
		}
	})
	t.Run("mismatched key pair", func(t *testing.T) {
		lines := loadErrLines(t, configtest.WithURL(map[string]string{
			"TETHER_UPSTREAM_CERT_FILE": ca, // a certificate without this key
			"TETHER_UPSTREAM_KEY_FILE":  key,
		}))
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "TETHER_UPSTREAM_CERT_FILE: cannot load key pair") {
			t.Errorf("problems = %q", lines)
		}
	})
}

// newTestPKI returns a self-signed CA and a client certificate it signed, PEM.
func newTestPKI(t *testing.T) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tether test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "tether test client"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	return writeFileIn(t, t.TempDir(), name, []byte(content))
}

func writeFileIn(t *testing.T, dir, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every check in Validate must name a real variable, or Load could not
// suppress it after a parse failure and --help would not explain it.
func TestValidateNamesKnownVariables(t *testing.T) {
	known := map[string]bool{}
	for _, v := range Variables() {
		known[v.Name] = true
	}
	bad := Config{
		UpstreamURL:       &url.URL{Scheme: "http"},
		UpstreamTokenFile: "/nonexistent",
		UpstreamCAFile:    "/nonexistent",
		UpstreamCertFile:  "/nonexistent",
		UpstreamKeyFile:   "/nonexistent",
		BackoffBase:       time.Second,
		PingInterval:      time.Second,
		MaxAttempts:       -1,
		MaxMessageBytes:   2 * GiB,
		ReauthCodes:       mustCodeSet(t, "1000"),
		PermanentCodes:    mustCodeSet(t, "1000"),
		LogLevel:          "x",
		LogFormat:         "x",
	}
	bad.UpstreamHeaders.header = http.Header{"Authorization": {"x"}}
	errs := flattenErrors(bad.Validate())
	if len(errs) < 20 {
		t.Errorf("Validate found %d problems in a config where almost everything is wrong:\n%v", len(errs), bad.Validate())
	}
	for _, e := range errs {
		var p *problem
		if !errors.As(e, &p) {
			t.Errorf("%v is not a *problem", e)
			continue
		}
		for _, n := range append([]string{p.name}, p.related...) {
			if !known[n] {
				t.Errorf("%v names unknown variable %s", e, n)
			}
		}
	}
	// Listen empty, everything else below zero.
	neg := Config{UpstreamURL: &url.URL{Scheme: "ws", Host: "h"}, AcceptWait: -1, DrainTimeout: -1, PingInterval: -1, LogLevel: "info", LogFormat: "json"}
	for _, e := range flattenErrors(neg.Validate()) {
		var p *problem
		if !errors.As(e, &p) || !known[p.name] {
			t.Errorf("%v does not name a known variable", e)
		}
	}
}
