package proxy

import (
	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/upstream"
)

// A protocol with Capabilities.Framing packs several protocol messages into
// one WebSocket message, or spreads one over several (Centrifugo and NATS
// commands, MQTT packets). Each direction of each connection has its own
// Framer: the app's lives as long as the session's reader, the upstream's
// as long as one upstream connection, so a message cut by a lost connection
// is never joined with the next connection's bytes. Each protocol message
// is classified, routed and delivered on its own, as its own WebSocket
// message of the same opcode.

// fromAppSplit routes each protocol message of one app WebSocket message.
// A message the protocol cannot frame leaves nothing that can be framed
// after it: the app is closed with 1002, and it reports false.
func (sess *Session) fromAppSplit(fr protocol.Framer, op ws.OpCode, data []byte) bool {
	msgs, err := fr.Split(op, data)
	for _, m := range msgs {
		sess.fromApp(op, m)
	}
	if err == nil {
		return true
	}
	sess.srv.opts.Metrics.AppDropped(labels.DropUnframed)
	sess.log.Warn("app message not framed by the protocol, closing app", zap.Error(err),
		zap.Int("bytes", len(data)), zap.Int("messages_before", len(msgs)))
	sess.closeApp(ws.StatusProtocolError, "message not framed by the protocol")
	return false
}

// split passes on each protocol message of one upstream WebSocket message
// from c. What the protocol cannot frame is dropped, logged and counted;
// the Framer starts afresh with the next message. The reader goroutine
// owns the Framer.
func (h upstreamHandler) split(c *upstream.Conn, op ws.OpCode, data []byte) {
	sess := h.sess
	if sess.upFramer == nil || sess.upFramerGen != c.Gen() {
		sess.upFramer, sess.upFramerGen = sess.srv.rules.caps.Framing(), c.Gen()
	}
	msgs, err := sess.upFramer.Split(op, data)
	for _, m := range msgs {
		h.message(c, op, m, nil)
	}
	if err != nil {
		sess.upFramer = nil
		sess.srv.opts.Metrics.AppDropped(labels.DropUnframed)
		sess.log.Warn("upstream message not framed by the protocol, dropped", zap.Error(err),
			zap.Uint64("gen", c.Gen()), zap.Int("bytes", len(data)), zap.Int("messages_before", len(msgs)))
	}
}
