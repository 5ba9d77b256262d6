package proxy

import (
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// sessionLogger is the server's logger with a session's fields, which are
// added to each line as it is written. zap's own With encodes them at once,
// into a clone of the encoder with a buffer of its own, about 1 KiB per
// session that an idle session, which logs nothing, holds for nothing. A
// session logs per event, never per message above debug, so adding two
// fields per line costs nothing that shows.
func sessionLogger(log *zap.Logger, fields ...zap.Field) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return &fieldsCore{parent: c, fields: fields}
	}))
}

// fieldsCore is the zapcore.Core of sessionLogger. The parent core decides
// which entries are written, and where: a tee of cores at different levels
// writes each entry only to those that take it.
type fieldsCore struct {
	parent zapcore.Core
	fields []zapcore.Field // shared by the loggers derived with With: never written to
}

func (c *fieldsCore) Enabled(l zapcore.Level) bool { return c.parent.Enabled(l) }

func (c *fieldsCore) With(fields []zapcore.Field) zapcore.Core {
	return &fieldsCore{parent: c.parent, fields: append(slices.Clip(c.fields), fields...)}
}

func (c *fieldsCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	taken := c.parent.Check(e, nil)
	if taken == nil {
		return ce
	}
	return ce.AddCore(e, &checkedFields{taken: taken, fields: c.fields})
}

func (c *fieldsCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	return c.parent.Write(e, withFields(c.fields, fields))
}

func (c *fieldsCore) Sync() error { return c.parent.Sync() }

// checkedFields writes one entry, with a session's fields, to the parent
// cores that took it in fieldsCore.Check. It is written once, as every core
// a CheckedEntry holds.
type checkedFields struct {
	taken  *zapcore.CheckedEntry
	fields []zapcore.Field
}

func (c *checkedFields) Enabled(zapcore.Level) bool { return true }

func (c *checkedFields) With([]zapcore.Field) zapcore.Core { return c }

func (c *checkedFields) Check(_ zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce
}

func (c *checkedFields) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	c.taken.Write(withFields(c.fields, fields)...)
	return nil
}

func (c *checkedFields) Sync() error { return nil }

// withFields is a session's fields followed by a line's, in a new slice.
func withFields(session, line []zapcore.Field) []zapcore.Field {
	all := make([]zapcore.Field, 0, len(session)+len(line))
	return append(append(all, session...), line...)
}
