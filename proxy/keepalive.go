package proxy

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/protocol"
)

// While no upstream connection is live, a protocol with
// Capabilities.Keepalive keeps the app's side alive itself: it answers the
// app's keepalives (a graphql-ws ping, an MQTT PINGREQ), which would
// otherwise wait in the outbox while the app's client library counts the
// missing answer as a dead connection, and sends the beats the app expects
// from its server (a server ping, a STOMP heart-beat). Once a connection is
// live, both are the upstream's again; a keepalive that went out on a
// connection lost before the upstream answered it is answered by tether
// then (protocol.Keepalive.Answer).

// answersKeepalive reports whether m is an app keepalive tether answers
// itself when no upstream connection is live: decided under the lock that
// decides whether one is, so a keepalive never waits in the outbox.
func (r *ruleSet) answersKeepalive(m *appMessage) bool {
	return m.class.Kind == protocol.AppKeepalive && r.caps.Keepalive.Answer != nil
}

// answerUnanswered answers the app keepalives sent on the lost connection
// gen that the upstream never answered: their answers will not come.
func (sess *Session) answerUnanswered(gen uint64, pings [][]byte) {
	if len(pings) == 0 {
		return
	}
	sess.log.Debug("app keepalives in flight on a lost connection answered", zap.Uint64("gen", gen), zap.Int("keepalives", len(pings)))
	for _, data := range pings {
		sess.toApp("app keepalive in flight on a lost connection answered", sess.srv.rules.caps.Keepalive.Answer(data))
	}
}

// beater sends the app the beats it expects from its server
// (protocol.Keepalive): its own state, the interval negotiated for the
// session and when the app last got a message, is atomic, because the
// upstream reader negotiates, every writer toward the app records, and a
// goroutine of the session's runs it.
type beater struct {
	k       protocol.Keepalive
	every   atomic.Int64 // the negotiated interval, a time.Duration
	changed chan struct{}
	sentAt  atomic.Int64 // when a message was last queued for the app, in Unix ns (Keepalive.Idle only)
}

// newBeater returns the beater of a protocol that beats, nil for one that
// does not: most sessions, which need not hold one.
func newBeater(k protocol.Keepalive) *beater {
	if k.Every <= 0 && k.Negotiate == nil {
		return nil
	}
	return &beater{k: k, changed: make(chan struct{}, 1)}
}

// on reports whether the protocol beats at all.
func (b *beater) on() bool { return b != nil }

// run sends Keepalive.Beat every Keepalive.Every, or as often as the
// protocol negotiated for this session (negotiate), while live reports no
// upstream connection, or with Keepalive.Idle whenever the app has had
// nothing for that long, until stop is closed or ctx is done. It runs on a
// goroutine of its own, started by serve.
func (b *beater) run(ctx context.Context, stop <-chan struct{}, live func() bool, send func(what string, m protocol.Message)) {
	every := b.k.Every
	t := time.NewTimer(every)
	defer t.Stop()
	if every <= 0 {
		t.Stop()
	}
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-b.changed:
			every = time.Duration(b.every.Load())
			if t.Stop(); every > 0 {
				t.Reset(every)
			}
			continue
		case <-t.C:
		}
		if b.k.Idle {
			if quiet := time.Since(time.Unix(0, b.sentAt.Load())); quiet < every {
				t.Reset(every - quiet)
				continue
			}
			send("keepalive sent to the app, idle for the beat interval", b.k.Beat)
		} else if !live() {
			send("keepalive sent to the app while the upstream is down", b.k.Beat)
		}
		t.Reset(every)
	}
}

// sent records that a message was queued for the app now, for the idle
// beats (Keepalive.Idle); without them it costs nothing.
func (b *beater) sent() {
	if b != nil && b.k.Idle {
		b.sentAt.Store(time.Now().UnixNano())
	}
}

// negotiate reads the beat interval the app and the upstream agreed on
// from answer, the upstream's answer to the app's login
// (Keepalive.Negotiate), and hands it to run. It reports the interval and
// whether it changed.
func (b *beater) negotiate(login, answer []byte) (time.Duration, bool) {
	every := b.k.Negotiate(login, answer)
	if old := time.Duration(b.every.Swap(int64(every))); old == every {
		return every, false
	}
	select {
	case b.changed <- struct{}{}:
	default: // run has yet to read the last change, which it reads anew
	}
	return every, true
}

// isLive reports whether an upstream connection is live.
func (sess *Session) isLive() bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.live != nil
}

// toApp writes a message tether sends on its own behalf to the app, once
// the app is set; not counted as an upstream message.
func (sess *Session) toApp(what string, m protocol.Message) {
	if !sess.waitApp() {
		return
	}
	if err := sess.app.Send(sess.ctx, m.Op, m.Data); err != nil {
		sess.log.Debug("message to the app not sent, app is closing", zap.String("what", what), zap.Error(err))
		return
	}
	sess.beat.sent()
	sess.log.Debug(what, zap.Int("bytes", len(m.Data)))
}
