package demo

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"go.uber.org/zap"
)

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

func TestRunSSETetherFailures(t *testing.T) {
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
			o.SSE = true
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
