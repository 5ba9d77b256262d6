package proxy_test

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/protocol/mqtt"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The session's side of the mqtt preset against a scripted broker: the
// CONNECT re-sent and its CONNACK hidden, subscriptions replayed and their
// SUBACKs hidden, unacknowledged publishes re-sent with DUP, PINGREQ
// answered while down, packets cut across WebSocket messages. Real brokers
// and clients (mosquitto, mqtt.js) run in internal/interop.

// mq encodes an MQTT packet: the first byte (type and flags) and the body.
func mq(first byte, body ...[]byte) []byte {
	b := bytes.Join(body, nil)
	out := []byte{first}
	for n := len(b); ; {
		c := byte(n & 0x7f)
		if n >>= 7; n > 0 {
			c |= 0x80
		}
		out = append(out, c)
		if n == 0 {
			break
		}
	}
	return append(out, b...)
}

func mqID(id uint16) []byte { return binary.BigEndian.AppendUint16(nil, id) }

func mqStr(s string) []byte { return append(mqID(uint16(len(s))), s...) }

// MQTT 3.1.1 packets of the tests.
var (
	mqConnect  = mq(0x10, mqStr("MQTT"), []byte{4, 2, 0, 2}, mqStr("app"))
	mqConnack  = mq(0x20, []byte{0, 0})
	mqRefused  = mq(0x20, []byte{0, 5}) // not authorized
	mqPingreq  = mq(0xc0)
	mqPingresp = mq(0xd0)
)

func mqSubscribe(id uint16, filter string) []byte {
	return mq(0x82, mqID(id), mqStr(filter), []byte{1})
}
func mqSuback(id uint16) []byte { return mq(0x90, mqID(id), []byte{1}) }
func mqUnsubscribe(id uint16, filter string) []byte {
	return mq(0xa2, mqID(id), mqStr(filter))
}
func mqUnsuback(id uint16) []byte { return mq(0xb0, mqID(id)) }

// mqPublish is a PUBLISH of QoS 1 (id > 0) or 0.
func mqPublish(topic string, id uint16, payload string) []byte {
	if id == 0 {
		return mq(0x30, mqStr(topic), []byte(payload))
	}
	return mq(0x32, mqStr(topic), mqID(id), []byte(payload))
}
func mqPuback(id uint16) []byte { return mq(0x40, mqID(id)) }

// dup is p with the DUP flag set.
func dup(p []byte) []byte { return append([]byte{p[0] | 0x08}, p[1:]...) }

// mqBroker answers as a broker would: CONNACK, SUBACK, UNSUBACK, PINGRESP,
// and a PUBACK to each QoS 1 PUBLISH unless holdAcks or silentPings say
// otherwise; it records every packet it reads, one per WebSocket message
// (tether sends each packet alone).
type mqBroker struct {
	holdAcks, silentPings atomic.Bool
	refusals              atomic.Int32 // CONNECTs answered with "not authorized" and a close
	// holdSubacks, when set, holds each SUBACK until the channel closes.
	holdSubacks atomic.Pointer[chan struct{}]
}

func (b *mqBroker) serve(u *upstreamEnv, c *upstreamtest.Conn) {
	for {
		op, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		if data[0]>>4 == 1 && b.refusals.Add(-1) >= 0 {
			_ = c.SendBinary(mqRefused)
			u.fromApp <- upMsg{conn: c.N(), op: op, data: string(data)}
			_ = c.Close()
			return
		}
		if reply := b.answer(data); reply != nil {
			if err := b.send(c, reply); err != nil {
				return
			}
		}
		select {
		case u.fromApp <- upMsg{conn: c.N(), op: op, data: string(data)}:
		case <-c.Done():
			return
		}
	}
}

// send writes reply, holding a SUBACK while holdSubacks says so.
func (b *mqBroker) send(c *upstreamtest.Conn, reply []byte) error {
	if hold := b.holdSubacks.Load(); hold != nil && reply[0]>>4 == 9 {
		go func() {
			select {
			case <-*hold:
				_ = c.SendBinary(reply)
			case <-c.Done():
			}
		}()
		return nil
	}
	return c.SendBinary(reply)
}

func (b *mqBroker) answer(p []byte) []byte {
	switch p[0] >> 4 {
	case 1:
		return mqConnack
	case 8:
		return mqSuback(binary.BigEndian.Uint16(p[2:]))
	case 10:
		return mqUnsuback(binary.BigEndian.Uint16(p[2:]))
	case 12:
		if !b.silentPings.Load() {
			return mqPingresp
		}
	case 3:
		if p[0]&0x06 != 0 && !b.holdAcks.Load() {
			at := 2 + 2 + int(binary.BigEndian.Uint16(p[2:]))
			return mqPuback(binary.BigEndian.Uint16(p[at:]))
		}
	}
	return nil
}

func (a *app) sendBinary(t *testing.T, data []byte) { a.send(t, ws.OpBinary, string(data)) }

// expectBinary fails unless the next message the app got is binary data.
func (a *app) expectBinary(t *testing.T, data []byte) {
	t.Helper()
	if m := a.next(t); m.op != ws.OpBinary || !bytes.Equal(m.data, data) {
		t.Fatalf("app got %v % x, want binary % x", m.op, m.data, data)
	}
}

func (u *upstreamEnv) expectPacket(t *testing.T, conn int, p []byte) {
	t.Helper()
	u.expectFromApp(t, conn, ws.OpBinary, string(p))
}

// mqTether is tether with the mqtt preset in front of an mqBroker that
// refuses handshakes while down is set, and an app that has connected (its
// CONNECT cut across two WebSocket messages) and seen its CONNACK.
func mqTether(t *testing.T, m *counts, b *mqBroker, down *atomic.Bool) (*upstreamEnv, *tetherEnv, *app, *upstreamtest.Conn) {
	t.Helper()
	up := newUpstream(t, upstreamConfig{onConn: b.serve, subprotocols: []string{mqtt.Subprotocol}, refuse: func(int) (int, http.Header) {
		if down.Load() {
			return http.StatusBadGateway, nil
		}
		return 0, nil
	}})
	e := newTether(t, up.srv.URL(), withProtocol(mqtt.New(mqtt.Options{MaxPacket: 1 << 16}), m))
	a := dialApp(t, e.url, appOptions{protocols: []string{mqtt.Subprotocol}})
	c := up.nextConn(t)
	a.sendBinary(t, mqConnect[:5])
	a.sendBinary(t, mqConnect[5:])
	up.expectPacket(t, c.N(), mqConnect)
	a.expectBinary(t, mqConnack)
	// The CONNECT may have been flushed by the first restore, whose switch
	// to live can still be to come: a PINGREQ sent before it would be
	// tether's to answer. The restore counter counts the live connection.
	awaitRestores(t, e, 1)
	return up, e, a, c
}

// After a reset the broker gets the CONNECT, the live subscription (not the
// one unsubscribed) and the unacknowledged PUBLISH with DUP, in that order;
// the app gets neither the second CONNACK nor the replay's SUBACK, but the
// PUBACK of its PUBLISH, once. Packets sharing a WebSocket message, and
// one cut across three, reach the broker one by one.
func TestMQTTRestore(t *testing.T) {
	m := newCounts()
	var b mqBroker
	var down atomic.Bool
	up, e, a, c := mqTether(t, m, &b, &down)
	// The first restore sent the CONNECT when it came before the
	// restore's snapshot, and nothing otherwise: only the second counts.
	first := e.srv.RestoreCounters()

	// Two packets in one message: both reach the broker, both answered.
	a.sendBinary(t, append(mqSubscribe(1, "a/+"), mqSubscribe(2, "b")...))
	up.expectPacket(t, c.N(), mqSubscribe(1, "a/+"))
	up.expectPacket(t, c.N(), mqSubscribe(2, "b"))
	a.expectBinary(t, mqSuback(1))
	a.expectBinary(t, mqSuback(2))
	a.sendBinary(t, mqUnsubscribe(3, "b"))
	up.expectPacket(t, c.N(), mqUnsubscribe(3, "b"))
	a.expectBinary(t, mqUnsuback(3))
	// A PUBLISH the broker does not acknowledge, cut across three messages.
	b.holdAcks.Store(true)
	pub := mqPublish("a/x", 4, "hello")
	a.sendBinary(t, pub[:1])
	a.sendBinary(t, pub[1:6])
	a.sendBinary(t, pub[6:])
	up.expectPacket(t, c.N(), pub)
	b.holdAcks.Store(false)

	_ = c.Reset()
	c = up.nextConn(t)
	up.expectPacket(t, c.N(), mqConnect)
	up.expectPacket(t, c.N(), mqSubscribe(1, "a/+"))
	up.expectPacket(t, c.N(), dup(pub))
	a.expectBinary(t, mqPuback(4)) // not the CONNACK, nor SUBACK 1
	// The PUBACK may reach the app before the restore makes the connection
	// live and counts what it sent; the count of restores, added last,
	// says both are done.
	awaitRestores(t, e, 2)

	// The app's next packets go live, with ids it used before.
	if err := c.SendBinary(mqPublish("a/x", 0, "from the broker")); err != nil {
		t.Fatal(err)
	}
	a.expectBinary(t, mqPublish("a/x", 0, "from the broker"))
	a.sendBinary(t, mqSubscribe(1, "c"))
	up.expectPacket(t, c.N(), mqSubscribe(1, "c"))
	a.expectBinary(t, mqSuback(1))
	up.expectNothingFromApp(t)
	if rc := e.srv.RestoreCounters(); rc.HiddenReplies != 2 || rc.Resent != 1 || rc.Replayed != 1 || rc.AuthSent-first.AuthSent != 1 {
		t.Errorf("counters %+v: want the CONNACK and SUBACK hidden, the CONNECT and a SUBSCRIBE replayed, one re-send", rc)
	}
}

// While the broker is down the app's PINGREQ is answered by tether, and so
// is one in flight when the connection is lost; a SUBSCRIBE sent during the
// outage goes once when the broker is back, and its SUBACK is the app's.
func TestMQTTOutage(t *testing.T) {
	m := newCounts()
	var b mqBroker
	var down atomic.Bool
	up, e, a, c := mqTether(t, m, &b, &down)

	a.sendBinary(t, mqPingreq)
	up.expectPacket(t, c.N(), mqPingreq)
	a.expectBinary(t, mqPingresp) // the broker's

	b.silentPings.Store(true)
	a.sendBinary(t, mqPingreq)
	up.expectPacket(t, c.N(), mqPingreq)
	down.Store(true)
	_ = c.Reset()
	a.expectBinary(t, mqPingresp) // tether's, for the one in flight
	a.sendBinary(t, mqPingreq)
	a.expectBinary(t, mqPingresp) // tether's, while down
	a.sendBinary(t, mqSubscribe(7, "during/outage"))
	a.sendBinary(t, mqPingreq)
	a.expectBinary(t, mqPingresp)

	down.Store(false)
	b.silentPings.Store(false)
	c = up.nextConn(t)
	up.expectPacket(t, c.N(), mqConnect)
	up.expectPacket(t, c.N(), mqSubscribe(7, "during/outage"))
	a.expectBinary(t, mqSuback(7))
	// The SUBACK is the restore's reply, passed on before the restore
	// makes the connection live; a PINGREQ sent before that is tether's
	// to answer. The restore counter counts the connection once it is live.
	awaitRestores(t, e, 2)
	a.sendBinary(t, mqPingreq)
	up.expectPacket(t, c.N(), mqPingreq)
	a.expectBinary(t, mqPingresp)
	up.expectNothingFromApp(t)
}

// A text message is no MQTT over WebSocket: the app is closed with 1002 and
// the drop counted.
func TestMQTTTextClosesApp(t *testing.T) {
	m := newCounts()
	var b mqBroker
	var down atomic.Bool
	_, _, a, _ := mqTether(t, m, &b, &down)
	a.sendText(t, "PINGREQ")
	a.expectClosed(t, testTimeout, ws.StatusProtocolError, "message not framed by the protocol")
	m.await(t, "app dropped "+labels.DropUnframed, 1)
}

// A CONNACK refusing a re-sent CONNECT is hidden like any later CONNACK: the
// app, which has its CONNACK, stays open, and tether reconnects (the broker
// closed the connection) until the broker accepts again.
func TestMQTTRefusedReconnect(t *testing.T) {
	m := newCounts()
	var b mqBroker
	var down atomic.Bool
	up, _, a, c := mqTether(t, m, &b, &down)
	b.refusals.Store(2)
	_ = c.Reset()
	for range 2 {
		c = up.nextConn(t)
		up.expectPacket(t, c.N(), mqConnect)
	}
	c = up.nextConn(t)
	up.expectPacket(t, c.N(), mqConnect)
	live := mqPublish("t", 0, "after the refusals")
	if err := c.SendBinary(live); err != nil {
		t.Fatal(err)
	}
	a.expectBinary(t, live) // the first thing the app got since its CONNACK
	a.expectOpen(t)
}

// A restore sends nothing of the app's before the replies to its replays
// came (Capabilities.AwaitReplies): the re-sent PUBLISH, which reuses the
// packet identifier of the replayed SUBSCRIBE, follows the SUBACK.
func TestMQTTReplayRepliesAwaited(t *testing.T) {
	m := newCounts()
	var b mqBroker
	var down atomic.Bool
	up, e, a, c := mqTether(t, m, &b, &down)
	a.sendBinary(t, mqSubscribe(1, "a"))
	up.expectPacket(t, c.N(), mqSubscribe(1, "a"))
	a.expectBinary(t, mqSuback(1))
	b.holdAcks.Store(true)
	pub := mqPublish("a", 1, "same id") // the app may use 1 again: its SUBACK came
	a.sendBinary(t, pub)
	up.expectPacket(t, c.N(), pub)
	b.holdAcks.Store(false)

	release := make(chan struct{})
	b.holdSubacks.Store(&release)
	_ = c.Reset()
	c = up.nextConn(t)
	up.expectPacket(t, c.N(), mqConnect)
	up.expectPacket(t, c.N(), mqSubscribe(1, "a"))
	// Held for a while the re-sent PUBLISH would need to arrive on
	// loopback if it did not wait: nothing comes.
	held := time.NewTimer(200 * time.Millisecond)
	select {
	case msg := <-up.fromApp:
		t.Fatalf("upstream read %q while the replay's SUBACK was held", msg.data)
	case <-held.C:
	}
	close(release)
	up.expectPacket(t, c.N(), dup(pub))
	a.expectBinary(t, mqPuback(1)) // the SUBACK was the replay's, hidden
	// The restore counts what it sent once it is done, which may be after
	// the PUBACK reached the app.
	awaitRestores(t, e, 2)
	if rc := e.srv.RestoreCounters(); rc.HiddenReplies != 2 || rc.Resent != 1 {
		t.Errorf("counters %+v: want the CONNACK and the SUBACK hidden, one re-send", rc)
	}
}

// A replay the broker never answers fails the restore after the dial
// timeout, as a missing login reply does: the connection is closed, the
// next one restored, and the app, open throughout, gets neither the
// missing SUBACK nor anything of the failed connection's.
func TestMQTTReplayReplyMissing(t *testing.T) {
	m := newCounts()
	var b mqBroker
	var down atomic.Bool
	up, _, a, c := mqTether(t, m, &b, &down)
	a.sendBinary(t, mqSubscribe(1, "a"))
	up.expectPacket(t, c.N(), mqSubscribe(1, "a"))
	a.expectBinary(t, mqSuback(1))

	never := make(chan struct{})
	b.holdSubacks.Store(&never)
	_ = c.Reset()
	c = up.nextConn(t)
	up.expectPacket(t, c.N(), mqConnect)
	up.expectPacket(t, c.N(), mqSubscribe(1, "a"))
	select {
	case <-c.Done(): // closed by tether once the dial timeout passed
	case <-time.After(dialTimeout + testTimeout):
		t.Fatalf("the connection whose replay got no SUBACK is still open after %v", dialTimeout+testTimeout)
	}
	b.holdSubacks.Store(nil)
	c = up.nextConn(t)
	up.expectPacket(t, c.N(), mqConnect)
	up.expectPacket(t, c.N(), mqSubscribe(1, "a"))
	live := mqPublish("a", 0, "restored")
	if err := c.SendBinary(live); err != nil {
		t.Fatal(err)
	}
	a.expectBinary(t, live)
	a.expectOpen(t)
}

// An app that connects while the broker is down has its CONNECT sent once
// the broker is up, and gets that CONNACK, its first; its PINGREQs are
// answered meanwhile.
func TestMQTTConnectWhileDown(t *testing.T) {
	var b mqBroker
	var down atomic.Bool
	down.Store(true)
	up := newUpstream(t, upstreamConfig{onConn: b.serve, subprotocols: []string{mqtt.Subprotocol}, refuse: func(int) (int, http.Header) {
		if down.Load() {
			return http.StatusBadGateway, nil
		}
		return 0, nil
	}})
	e := newTether(t, up.srv.URL(), withProtocol(mqtt.New(mqtt.Options{}), nil))
	a := dialApp(t, e.url, appOptions{protocols: []string{mqtt.Subprotocol}})
	a.sendBinary(t, mqConnect)
	a.sendBinary(t, mqPingreq)
	a.expectBinary(t, mqPingresp)
	a.sendBinary(t, mqSubscribe(3, "s"))
	down.Store(false)
	c := up.nextConn(t)
	up.expectPacket(t, c.N(), mqConnect)
	up.expectPacket(t, c.N(), mqSubscribe(3, "s"))
	a.expectBinary(t, mqConnack)
	a.expectBinary(t, mqSuback(3))
	up.expectNothingFromApp(t)
}

// An UNSUBSCRIBE sent while the broker is down reaches the broker when it
// is back (protocol.State.Fold), before the replays, which no longer hold
// its subscription, and the app gets the broker's UNSUBACK: a persistent
// session may still hold the subscription, and the app awaits the answer.
// A SUBSCRIBE and the UNSUBSCRIBE of its filter sent in one outage both
// get their answer.
func TestMQTTUnsubscribeWhileDown(t *testing.T) {
	m := newCounts()
	var b mqBroker
	var down atomic.Bool
	up, _, a, c := mqTether(t, m, &b, &down)
	a.sendBinary(t, mqSubscribe(1, "a"))
	up.expectPacket(t, c.N(), mqSubscribe(1, "a"))
	a.expectBinary(t, mqSuback(1))
	a.sendBinary(t, mqSubscribe(2, "b"))
	up.expectPacket(t, c.N(), mqSubscribe(2, "b"))
	a.expectBinary(t, mqSuback(2))
	down.Store(true)
	_ = c.Reset()
	a.sendBinary(t, mqPingreq)
	a.expectBinary(t, mqPingresp)
	a.sendBinary(t, mqUnsubscribe(3, "a"))
	a.sendBinary(t, mqSubscribe(6, "d"))
	a.sendBinary(t, mqUnsubscribe(7, "d"))
	down.Store(false)
	c = up.nextConn(t)
	up.expectPacket(t, c.N(), mqConnect)
	up.expectPacket(t, c.N(), mqSubscribe(1, "a")) // what it cancels, first: its SUBACK is hidden
	up.expectPacket(t, c.N(), mqUnsubscribe(3, "a"))
	up.expectPacket(t, c.N(), mqSubscribe(6, "d"))
	up.expectPacket(t, c.N(), mqUnsubscribe(7, "d"))
	up.expectPacket(t, c.N(), mqSubscribe(2, "b"))
	a.expectBinary(t, mqUnsuback(3))
	a.expectBinary(t, mqSuback(6))
	a.expectBinary(t, mqUnsuback(7))
	a.sendBinary(t, mqUnsubscribe(4, "b")) // live: sent once, answered once
	up.expectPacket(t, c.N(), mqUnsubscribe(4, "b"))
	a.expectBinary(t, mqUnsuback(4))
	_ = c.Reset()
	c = up.nextConn(t)
	up.expectPacket(t, c.N(), mqConnect)
	a.sendBinary(t, mqSubscribe(5, "c")) // nothing replayed before it
	up.expectPacket(t, c.N(), mqSubscribe(5, "c"))
	a.expectBinary(t, mqSuback(5))
	up.expectNothingFromApp(t)
}
