package config

import (
	"fmt"

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

// ParseLogLevel accepts only the four levels tether logs at; zap's own parser
// would also take "dpanic", "panic" and "fatal", which hide every line tether writes.
func ParseLogLevel(level string) (zapcore.Level, error) {
	lvl, ok := logLevels[level]
	if !ok {
		return 0, fmt.Errorf("invalid log level %q: use debug, info, warn or error", level)
	}
	return lvl, nil
}

// NewLogEncoder builds the encoder of TETHER_LOG_FORMAT: json or console.
func NewLogEncoder(format string) (zapcore.Encoder, error) {
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
