package main

import (
	"fmt"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logLevels are the accepted values of TETHER_LOG_LEVEL.
var logLevels = map[string]zapcore.Level{
	"debug": zapcore.DebugLevel,
	"info":  zapcore.InfoLevel,
	"warn":  zapcore.WarnLevel,
	"error": zapcore.ErrorLevel,
}

// newLogger builds the root logger writing to w.
//
// Sampling is off on purpose: zap's production sampler drops repeated lines, and
// the lines that repeat in a proxy are exactly the loss, drop and reconnect lines
// an operator needs to count. No caller or stack traces: log lines here describe
// network events, not bugs, and tether's messages are unique enough to grep.
func newLogger(level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := parseLogLevel(level)
	if err != nil {
		return nil, err
	}
	enc, err := newLogEncoder(format)
	if err != nil {
		return nil, err
	}
	// Lock: the writer may be shared (stderr) and zap cores write from any goroutine.
	sink := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewCore(enc, sink, lvl)
	return zap.New(core, zap.ErrorOutput(sink)), nil
}

// parseLogLevel accepts only the four levels tether logs at; zap's own parser
// would also take "dpanic", "panic" and "fatal", which hide every line tether writes.
func parseLogLevel(level string) (zapcore.Level, error) {
	lvl, ok := logLevels[level]
	if !ok {
		return 0, fmt.Errorf("invalid log level %q: use debug, info, warn or error", level)
	}
	return lvl, nil
}

func newLogEncoder(format string) (zapcore.Encoder, error) {
	switch format {
	case "json":
		cfg := zap.NewProductionEncoderConfig() // ts, level, logger, msg
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		return zapcore.NewJSONEncoder(cfg), nil
	case "console":
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		// Colour codes end up as garbage in files and kubectl logs.
		cfg.EncodeLevel = zapcore.CapitalLevelEncoder
		cfg.CallerKey = zapcore.OmitKey
		cfg.StacktraceKey = zapcore.OmitKey
		return zapcore.NewConsoleEncoder(cfg), nil
	default:
		return nil, fmt.Errorf("invalid log format %q: use json or console", format)
	}
}
