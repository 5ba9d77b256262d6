package upstream

import (
	"errors"
	"time"

	"github.com/tetherproxy/tether/internal/proxydial"
	"go.uber.org/zap"
)

// lossFields describes a loss or failed dial for the one log line it gets:
// attempt, chosen delay, and the close code/reason or HTTP status.
func lossFields(cause error, attempt int, delay time.Duration) []zap.Field {
	fields := []zap.Field{zap.Int("attempt", attempt), zap.Duration("delay", delay)}
	var ce *CloseError
	var se *StatusError
	var pe *proxydial.Error
	switch {
	case errors.As(cause, &pe):
		fields = append(fields, zap.String("proxy", pe.Addr))
		if pe.Status != 0 {
			fields = append(fields, zap.Int("proxy_status", pe.Status))
		}
	case errors.As(cause, &ce):
		fields = append(fields, zap.Int("close_code", ce.Code), zap.String("close_reason", ce.Reason))
	case errors.As(cause, &se):
		fields = append(fields, zap.Int("http_status", se.Status))
		if se.RetryAfter > 0 {
			fields = append(fields, zap.Duration("retry_after", se.RetryAfter))
		}
	}
	return append(fields, zap.String("reason", describe(cause)))
}

// describe names a cause in words an operator searches for.
func describe(err error) string {
	switch {
	case err == nil:
		return "unknown"
	case errors.Is(err, ErrHeartbeatTimeout):
		return "heartbeat timeout"
	}
	return err.Error()
}
