package proxy

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A session's logger writes its fields before each line's, as zap's With
// does, and only to the cores of the server's logger that take the line's
// level.
func TestSessionLoggerFields(t *testing.T) {
	info, infoLogs := observer.New(zapcore.InfoLevel)
	warn, warnLogs := observer.New(zapcore.WarnLevel)
	root := zap.New(zapcore.NewTee(info, warn))
	log := sessionLogger(root, 7, ListenerWS).Named("upstream")
	log.Info("upstream connected", zap.Int("attempt", 1))
	log.With(zap.Uint64("gen", 2)).Warn("upstream lost")
	log.Debug("not written")

	want := [][]string{{"session", "listener", "attempt"}, {"session", "listener", "gen"}}
	got := infoLogs.All()
	if len(got) != len(want) {
		t.Fatalf("info core got %d lines, want %d: %v", len(got), len(want), got)
	}
	for i, e := range got {
		if e.LoggerName != "upstream" {
			t.Errorf("line %d: logger %q, want upstream", i, e.LoggerName)
		}
		var keys []string
		for _, f := range e.Context {
			keys = append(keys, f.Key)
		}
		if len(keys) != len(want[i]) {
			t.Fatalf("line %d %q: fields %v, want %v", i, e.Message, keys, want[i])
		}
		for j := range keys {
			if keys[j] != want[i][j] {
				t.Errorf("line %d %q: fields %v, want %v", i, e.Message, keys, want[i])
			}
		}
	}
	if n := warnLogs.Len(); n != 1 {
		t.Errorf("warn core got %d lines, want only the warning", n)
	}
	if got := warnLogs.All()[0].ContextMap()["session"]; got != uint64(7) {
		t.Errorf("warn line: session %v, want 7", got)
	}
}
