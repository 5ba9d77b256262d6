package proxy

import (
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// sessionLogger is the server's logger with a session's fields, its id and
// listener kind, which are added to each line as it is written. zap's own
// With encodes them at once, into a clone of the encoder with a buffer of
// its own, about 1 KiB per session that an idle session, which logs
// nothing, holds for nothing; the core holds the two values, not the two
// zap fields made of them (128 bytes). A session logs per event, never per
// message above debug, so making and adding two fields per line costs
// nothing that shows.
func sessionLogger(log *zap.Logger, id uint64, kind ListenerKind) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return &fieldsCore{parent: c, id: id, kind: kind}
	}))
}

// fieldsCore is the zapcore.Core of sessionLogger. The parent core decides
// which entries are written, and where: a tee of cores at different levels
// writes each entry only to those that take it.
type fieldsCore struct {
	parent zapcore.Core
	id     uint64
	kind   ListenerKind
	more   []zapcore.Field // added by With; shared by the loggers derived with it: never written to
}

func (c *fieldsCore) Enabled(l zapcore.Level) bool { return c.parent.Enabled(l) }

func (c *fieldsCore) With(fields []zapcore.Field) zapcore.Core {
	return &fieldsCore{parent: c.parent, id: c.id, kind: c.kind, more: append(slices.Clip(c.more), fields...)}
}

func (c *fieldsCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	taken := c.parent.Check(e, nil)
	if taken == nil {
		return ce
	}
	return ce.AddCore(e, &checkedFields{taken: taken, session: c})
}

func (c *fieldsCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	return c.parent.Write(e, c.withFields(fields))
}

func (c *fieldsCore) Sync() error { return c.parent.Sync() }

// withFields is the session's fields followed by a line's, in a new slice.
func (c *fieldsCore) withFields(line []zapcore.Field) []zapcore.Field {
	all := make([]zapcore.Field, 0, 2+len(c.more)+len(line))
	all = append(all, zap.Uint64("session", c.id), zap.String("listener", string(c.kind)))
	return append(append(all, c.more...), line...)
}

// checkedFields writes one entry, with a session's fields, to the parent
// cores that took it in fieldsCore.Check. It is written once, as every core
// a CheckedEntry holds.
type checkedFields struct {
	taken   *zapcore.CheckedEntry
	session *fieldsCore
}

func (c *checkedFields) Enabled(zapcore.Level) bool { return true }

func (c *checkedFields) With([]zapcore.Field) zapcore.Core { return c }

func (c *checkedFields) Check(_ zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce
}

func (c *checkedFields) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	c.taken.Write(c.session.withFields(fields)...)
	return nil
}

func (c *checkedFields) Sync() error { return nil }
