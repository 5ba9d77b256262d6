package main

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tetherproxy/tether/internal/config"
)

// newLogger builds the root logger writing to w.
//
// Sampling is off on purpose: zap's production sampler drops repeated lines, and
// the lines that repeat in a proxy are exactly the loss, drop and reconnect lines
// an operator needs to count. No caller or stack traces: log lines here describe
// network events, not bugs, and tether's messages are unique enough to grep.
func newLogger(level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := config.ParseLogLevel(level)
	if err != nil {
		return nil, err
	}
	enc, err := config.NewLogEncoder(format)
	if err != nil {
		return nil, err
	}
	// Lock: the writer may be shared (stderr) and zap cores write from any goroutine.
	sink := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewCore(enc, sink, lvl)
	return zap.New(core, zap.ErrorOutput(sink)), nil
}
