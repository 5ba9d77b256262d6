package proxy

import (
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/upstream"
)

// hidden applies the upstream-side rules to a message from c and reports
// whether the app must not see it: a second welcome, the reply to a request
// tether replayed, a repeated acknowledgement. The state the message carries
// (a login reply a restore waits for, an acknowledgement) is taken into
// account either way. Each hidden message is logged at debug and counted.
//
// c is nil for a message fetched over HTTP (TETHER_GAPFILL_URL): no login
// waits for it.
func (sess *Session) hidden(c *upstream.Conn, data []byte) bool {
	var v ruleValues
	sess.srv.rules.upScan.read(data, &v)
	return sess.hiddenIn(c, data, &v)
}

// hiddenIn is hidden for a message whose top level was read into v.
func (sess *Session) hiddenIn(c *upstream.Conn, data []byte, v *ruleValues) bool {
	u := sess.srv.rules.classifyUpstreamIn(data, v)
	if !u.any() {
		return false
	}
	sess.mu.Lock()
	why := sess.restore.upstreamMessage(c, u)
	sess.mu.Unlock()
	if why == "" {
		return false
	}
	sess.srv.totals.hidden(why)
	sess.log.Debug("upstream message hidden from the app", zap.String("reason", why),
		zap.Uint64("gen", genOf(c)), zap.Int("bytes", len(data)))
	return true
}

// genOf is c's generation, 0 for nil (a message that came over HTTP).
func genOf(c *upstream.Conn) uint64 {
	if c == nil {
		return 0
	}
	return c.Gen()
}
