package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestNewLoggerJSON(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("info", "json", &buf)
	if err != nil {
		t.Fatalf("newLogger: %v", err)
	}
	log.Named("upstream").Info("upstream lost", zap.Int("attempt", 3))
	log.Debug("hidden at info")

	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("want exactly one JSON line, got %q: %v", buf.String(), err)
	}
	want := map[string]any{"level": "info", "logger": "upstream", "msg": "upstream lost", "attempt": 3.0}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v", k, line[k], v)
		}
	}
	ts, _ := line["ts"].(string)
	if _, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts); err != nil {
		t.Errorf("ts = %q, want ISO8601: %v", ts, err)
	}
}

// Repeated identical lines must all be written: zap's production sampler
// would drop most of a burst of loss lines.
func TestNewLoggerDoesNotSample(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("debug", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for range n {
		log.Warn("outbox message dropped")
	}
	if got := strings.Count(buf.String(), "\n"); got != n {
		t.Errorf("wrote %d lines, want %d", got, n)
	}
}

func TestNewLoggerConsole(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("warn", "console", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden at warn")
	log.Warn("upstream lost", zap.Int("close_code", 1006))
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "WARN") || !strings.Contains(out, "upstream lost") {
		t.Errorf("console output = %q", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("console output has colour codes: %q", out)
	}
}

func TestNewLoggerErrors(t *testing.T) {
	tests := []struct{ level, format, want string }{
		{"trace", "json", `invalid log level "trace"`},
		{"fatal", "json", `invalid log level "fatal"`},
		{"INFO", "json", `invalid log level "INFO"`},
		{"info", "text", `invalid log format "text"`},
		{"info", "", `invalid log format ""`},
	}
	for _, tt := range tests {
		if _, err := newLogger(tt.level, tt.format, &bytes.Buffer{}); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("newLogger(%q, %q) error = %v, want prefix %q", tt.level, tt.format, err, tt.want)
		}
	}
}
