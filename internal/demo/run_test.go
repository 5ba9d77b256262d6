package demo

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func validOptions() Options {
	return Options{
		FaultEvery: DefaultFaultEvery,
		Rate:       DefaultRate,
		Out:        &bytes.Buffer{},
		Tether: func(ctx context.Context, _ map[string]string, _ *zap.Logger, _ chan<- net.Addr) error {
			<-ctx.Done()
			return nil
		},
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"negative duration", func(o *Options) { o.Duration = -time.Second }, "duration"},
		{"faults too often", func(o *Options) { o.FaultEvery = time.Millisecond }, "fault interval"},
		{"rate zero", func(o *Options) { o.Rate = 0 }, "rate"},
		{"rate too high", func(o *Options) { o.Rate = MaxRate + 1 }, "rate"},
		{"no output", func(o *Options) { o.Out = nil }, "output"},
		{"no tether", func(o *Options) { o.Tether = nil }, "tether"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.change(&o)
			err := Run(context.Background(), o)
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run = %v, want ErrInvalidOptions about %s", err, tc.want)
			}
		})
	}
}

func TestRunTetherFailures(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "websocket", true: "sse"}[sse], func(t *testing.T) { testRunTetherFailures(t, sse) })
	}
}

func testRunTetherFailures(t *testing.T, sse bool) {
	errBoom := errors.New("boom")
	tests := []struct {
		name   string
		tether TetherFunc
		want   error
	}{
		{"fails to start", func(context.Context, map[string]string, *zap.Logger, chan<- net.Addr) error {
			return errBoom
		}, errBoom},
		{"returns at once", func(context.Context, map[string]string, *zap.Logger, chan<- net.Addr) error {
			return nil
		}, ErrTetherStopped},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			o.SSE = sse
			o.Tether = tc.tether
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			err := Run(ctx, o)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			if n := strings.Count(err.Error(), tc.want.Error()); n != 1 {
				t.Errorf("Run = %q: the cause is reported %d times, want once", err, n)
			}
		})
	}
}

// Run hands tether the demo's configuration, and stops it when interrupted
// before tether was ready.
func TestRunPassesTheDemoConfiguration(t *testing.T) {
	got := make(chan map[string]string, 1)
	o := validOptions()
	ctx, cancel := context.WithCancel(context.Background())
	o.Tether = func(tctx context.Context, env map[string]string, _ *zap.Logger, _ chan<- net.Addr) error {
		got <- env
		cancel() // the user presses Ctrl-C before tether listens
		<-tctx.Done()
		return nil
	}
	if err := Run(ctx, o); err != nil {
		t.Fatalf("Run = %v, want nil after an interruption", err)
	}
	env := <-got
	want := map[string]string{
		"TETHER_LISTEN":        "127.0.0.1:0",
		"TETHER_ADMIN_LISTEN":  "off",
		"TETHER_PING_INTERVAL": "1s",
		"TETHER_PING_TIMEOUT":  "1s",
		"TETHER_CONFIRM_MATCH": confirmMatch,
		"TETHER_RESTART_FLOOR": "1s",

		"TETHER_SUBSCRIBE_MATCH":         `{"t":"sub"}`,
		"TETHER_SUBSCRIPTION_KEY":        "channel",
		"TETHER_REPLY_ID_PATH":           "id",
		"TETHER_HIDE_ON_RECONNECT_MATCH": `{"t":"welcome"}`,

		"TETHER_SESSION_MATCH":   `{"t":"welcome"}`,
		"TETHER_SESSION_PATH":    "session",
		"TETHER_RESUME_MESSAGE":  `{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`,
		"TETHER_SEQ_PATH":        "seq",
		"TETHER_RESYNC_MATCH":    `{"t":"welcome","resync":true}`,
		"TETHER_RESYNC_SEQ_PATH": "seq",
		"TETHER_GAP_TIMEOUT":     "2s",
		"TETHER_GAP_POLICY":      "notify",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if !strings.HasPrefix(env["TETHER_UPSTREAM_URL"], "ws://127.0.0.1:") {
		t.Errorf("TETHER_UPSTREAM_URL = %q, want the feed", env["TETHER_UPSTREAM_URL"])
	}
	if u := env["TETHER_GAPFILL_URL"]; !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/catchup?from={{.From}}&to={{.To}}") {
		t.Errorf("TETHER_GAPFILL_URL = %q, want the feed's catch-up endpoint", u)
	}
}

// The SSE demo hands tether an SSE configuration: an http:// upstream (the
// kind is inferred), an sse:// listener, the data format with seq
// sequencing, and none of the settings that send to the upstream.
func TestRunSSEPassesItsConfiguration(t *testing.T) {
	got := make(chan map[string]string, 1)
	o := validOptions()
	o.SSE = true
	ctx, cancel := context.WithCancel(context.Background())
	o.Tether = func(tctx context.Context, env map[string]string, _ *zap.Logger, _ chan<- net.Addr) error {
		got <- env
		cancel() // the user presses Ctrl-C before tether listens
		<-tctx.Done()
		return nil
	}
	if err := Run(ctx, o); err != nil {
		t.Fatalf("Run = %v, want nil after an interruption", err)
	}
	env := <-got
	want := map[string]string{
		"TETHER_LISTEN":        "sse://127.0.0.1:0/events",
		"TETHER_SSE_FORMAT":    "data",
		"TETHER_SSE_LINGER":    "30s",
		"TETHER_SEQ_PATH":      "seq",
		"TETHER_PING_INTERVAL": "1s",
		"TETHER_PING_TIMEOUT":  "1s",
		"TETHER_CONFIRM_MATCH": `{"t":"event"}`,
		"TETHER_GAP_POLICY":    "notify",
		"TETHER_ADMIN_LISTEN":  "off",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if u := env["TETHER_UPSTREAM_URL"]; !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, ssePath) {
		t.Errorf("TETHER_UPSTREAM_URL = %q, want the SSE feed", u)
	}
	for _, k := range []string{"TETHER_UPSTREAM_KIND", "TETHER_SUBSCRIBE_MATCH", "TETHER_RESUME_MESSAGE", "TETHER_GAPFILL_URL"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s = %q, want it unset", k, v)
		}
	}
}
