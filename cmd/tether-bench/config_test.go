package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestTetherEnv(t *testing.T) {
	passed, ignored := passedTetherEnv([]string{
		"TETHER_LOG_LEVEL=debug", "TETHER_LISTEN=0.0.0.0:1", "TETHER_PING_INTERVAL=5s", "HOME=/root",
	})
	if !slices.Equal(ignored, []string{"TETHER_LISTEN"}) {
		t.Fatalf("ignored %v, want TETHER_LISTEN", ignored)
	}
	for _, seq := range []bool{false, true} {
		s := tetherSetup{feedURL: "ws://127.0.0.1:1/feed", maxSessions: 10, sequencing: seq, passed: passed}
		env, vars := s.env("127.0.0.1:2", "127.0.0.1:3")
		want := map[string]string{
			"TETHER_UPSTREAM_URL":  "ws://127.0.0.1:1/feed",
			"TETHER_LISTEN":        "127.0.0.1:2", // the tool's, not the environment's
			"TETHER_ADMIN_LISTEN":  "127.0.0.1:3",
			"TETHER_LOG_LEVEL":     "debug", // passed through over the default
			"TETHER_PING_INTERVAL": "5s",
			"TETHER_MAX_SESSIONS":  "10",
		}
		for k, v := range want {
			if vars[k] != v {
				t.Errorf("sequencing %v: %s = %q, want %q", seq, k, vars[k], v)
			}
		}
		if got, has := vars["TETHER_SEQ_PATH"]; has != seq || (seq && got != "seq") {
			t.Errorf("sequencing %v: TETHER_SEQ_PATH %q (set %v)", seq, got, has)
		}
		for _, kv := range env {
			if strings.HasPrefix(kv, "TETHER_") && vars[strings.SplitN(kv, "=", 2)[0]] == "" {
				t.Errorf("environment entry %q not from the computed variables", kv)
			}
		}
	}
}

func TestFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-sizes", "64,1KiB", "-rounds", "5", "-tether-baseline", "/x"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.rounds != 5 || len(cfg.sizes) != 2 || !cfg.wants(targetBaseline) || !cfg.wants(targetNginx64k) {
		t.Fatalf("config %+v", cfg)
	}
	if len(cfg.scenarios()) != 4 {
		t.Fatalf("%d scenarios for 2 sizes, want 4", len(cfg.scenarios()))
	}
	for _, bad := range [][]string{
		{"-duration", "1s", "-warmup", "2s"},
		{"-targets", "haproxy"},
		{"-targets", "tether-base"},
		{"-rate", "0"},
		{"extra"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded", bad)
		}
	}
}
