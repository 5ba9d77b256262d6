package interop

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// The STOMP app: @stomp/stompjs 7 from npm, with ws 8, in
// testdata/node_modules like ws.
const stompInstall = "npm install --no-audit --no-fund --no-save --prefix internal/interop/testdata ws@8 @stomp/stompjs@7"

var stompOnce = sync.OnceValues(func() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", err
	}
	// stompjs exports no package.json: its version is read from the file.
	cmd := exec.Command(node, "-e", `const fs = require("fs"); process.stdout.write(JSON.parse(fs.readFileSync("node_modules/@stomp/stompjs/package.json")).version)`)
	cmd.Dir = "testdata"
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("@stomp/stompjs is not in testdata/node_modules: %w", err)
	}
	if !strings.HasPrefix(string(out), "7.") {
		return "", fmt.Errorf("@stomp/stompjs %s in testdata/node_modules, want 7.x", out)
	}
	return node + "\x00" + string(out), nil
})

// stompBeat is the app's heart-beat, both ways: stompjs closes its socket
// when its server is silent for two of them.
const stompBeat = 2 * time.Second

// stompEvent is one line of stomp_app.mjs.
type stompEvent struct {
	Event       string `json:"event"`
	Sub         string `json:"sub"`
	Dest        string `json:"dest"`
	Body        string `json:"body"`
	ID          string `json:"id"`
	Message     string `json:"message"`
	Redelivered bool   `json:"redelivered"`
	Unhandled   bool   `json:"unhandled"`
}

// stompApp is the stompjs process, with what it saw.
type stompApp struct {
	peer
	connected int
	bySub     map[string][]string // message bodies by subscription id
	msgs      []stompEvent        // every message, in order
	receipts  map[string]bool
}

// await returns the app's first event that match accepts, recording every
// event on the way; a close, a heart-beat given up or an ERROR frame fail
// the test: the app's session must never end.
func (a *stompApp) await(t *testing.T, wait time.Duration, what string, match func(stompEvent) bool) stompEvent {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		raw := a.next(t, time.Until(deadline), what).raw
		var ev stompEvent
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			t.Fatalf("app: %q: %v", raw, err)
		}
		switch ev.Event {
		case "connected":
			a.connected++
		case "message":
			a.bySub[ev.Sub] = append(a.bySub[ev.Sub], ev.Body)
			a.msgs = append(a.msgs, ev)
		case "receipt":
			a.receipts[ev.ID] = true
		case "close", "heartbeat-lost", "stomp-error":
			t.Fatalf("app: %s while waiting for %s", raw, what)
		}
		if match(ev) {
			return ev
		}
	}
}

func (a *stompApp) cmd(t *testing.T, c map[string]any) { a.send(t, c) }

// awaitNth returns the n-th message (0: the first) with body on
// subscription sub, among those seen already or the next.
func (a *stompApp) awaitNth(t *testing.T, sub, body string, n int) stompEvent {
	t.Helper()
	count := func() (stompEvent, bool) {
		i := 0
		for _, m := range a.msgs {
			if m.Sub == sub && m.Body == body {
				if i == n {
					return m, true
				}
				i++
			}
		}
		return stompEvent{}, false
	}
	if m, ok := count(); ok {
		return m
	}
	return a.await(t, messageWait, fmt.Sprintf("%s's message %s #%d", sub, body, n+1), func(stompEvent) bool {
		_, ok := count()
		return ok
	})
}

// message matches the message with body on subscription sub.
func message(sub, body string) func(stompEvent) bool {
	return func(e stompEvent) bool { return e.Event == "message" && e.Sub == sub && e.Body == body }
}

func receipt(id string) func(stompEvent) bool {
	return func(e stompEvent) bool { return e.Event == "receipt" && e.ID == id }
}

// live checks that the live subscription flows: a message the app
// publishes comes back on it.
func (a *stompApp) live(t *testing.T, wait time.Duration, body string) {
	t.Helper()
	a.cmd(t, map[string]any{"cmd": "send", "dest": "/topic/gone", "body": "gone-" + body})
	a.cmd(t, map[string]any{"cmd": "send", "dest": "/topic/ticks", "body": body})
	a.await(t, wait, "the live subscription's "+body, message("live", body))
}

// receipted sends body, persistent, to the durable queue /queue/sends with
// a receipt header. The app's subscription "sends" (ack:auto) receives it.
func (a *stompApp) receipted(t *testing.T, body string) {
	t.Helper()
	a.cmd(t, map[string]any{"cmd": "send", "dest": "/queue/sends", "body": body, "receipt": "r-" + body})
}

// TestSTOMPPreset runs the real @stomp/stompjs client through tether with
// TETHER_PROTOCOL=stomp to a real RabbitMQ with Web STOMP, across
// rabbitmqctl close_all_connections and a SIGKILL whose restart takes
// longer than the app's heart-beat timeout. The app's socket never closes
// and it sees one CONNECTED; the live subscription flows again after each
// fault, one started during the outage too, the one it unsubscribed never
// comes back; an ACK of a message of the lost connection is dropped (not
// sent as a protocol error) and the redelivered copy is acknowledged; and
// every send the app asked a receipt for gets its RECEIPT, and reaches the
// queue at least once.
//
// What the broker does with a message after its RECEIPT is the broker's
// (docs/protocols.md, stomp): RabbitMQ 3.10, killed about a second after
// the first SEND to /queue/sends declared that durable queue, can come
// back without the queue, and without the receipted messages in it (once
// in CI through tether, once in 12 runs with no tether in between). So
// the test sees each send arrive on a subscription that is live
// throughout, rather than asking the restarted broker to have kept it.
func TestSTOMPPreset(t *testing.T) {
	found, err := stompOnce()
	need(t, "Node.js with @stomp/stompjs 7", stompInstall, err)
	tools, err := rabbitOnce()
	need(t, "RabbitMQ (Debian's rabbitmq-server, with epmd, and setpriv as root)", rabbitInstall, err)
	node, version, _ := strings.Cut(found, "\x00")
	t.Logf("peers: @stomp/stompjs %s, Debian's RabbitMQ in %s", version, rabbitBin)

	// tether pings every 500 ms, more often than the heart-beats, so that
	// RabbitMQ, counting its pongs as its heart-beats, skips its own and
	// tether's keep the app. The faults here end the connection at the
	// socket (a close frame, a reset): no pong is awaited to find them, and
	// a pong late on a loaded machine must not end a connection, since each
	// loss redelivers w1 once more (with 500 ms, a CI-like load did twice).
	mq := newRabbit(t, tools)
	tt := startTether(t, mq.url(), "TETHER_PROTOCOL=stomp", "TETHER_LOG_LEVEL=debug",
		"TETHER_PING_INTERVAL=500ms", "TETHER_PING_TIMEOUT="+messageWait.String())
	cmd := exec.Command(node, "stomp_app.mjs", "ws://"+tt.addr+"/ws", fmt.Sprint(stompBeat.Milliseconds()))
	cmd.Dir = "testdata"
	app := &stompApp{peer: peer{startProc(t, "stompjs app", cmd, false)}, bySub: map[string][]string{}, receipts: map[string]bool{}}
	app.await(t, messageWait, "connected", func(e stompEvent) bool { return e.Event == "connected" })
	awaitLog(t, tt.log, messageWait, "upstream confirmed") // the first connection's

	app.cmd(t, map[string]any{"cmd": "subscribe", "id": "live", "dest": "/topic/ticks"})
	app.cmd(t, map[string]any{"cmd": "subscribe", "id": "gone", "dest": "/topic/gone"})
	app.cmd(t, map[string]any{"cmd": "subscribe", "id": "work", "dest": "/queue/work", "ack": "client-individual"})
	app.cmd(t, map[string]any{"cmd": "subscribe", "id": "sends", "dest": "/queue/sends"})
	app.cmd(t, map[string]any{"cmd": "unsubscribe", "id": "gone"})
	app.live(t, messageWait, "tick-1")
	app.receipted(t, "s1")
	app.await(t, messageWait, "the receipt of s1", receipt("r-s1"))
	app.awaitNth(t, "sends", "s1", 0)
	app.cmd(t, map[string]any{"cmd": "send", "dest": "/queue/work", "body": "w1"})
	app.await(t, messageWait, "w1, unacknowledged", message("work", "w1"))

	// The broker closes every connection: tether reconnects, the app
	// notices nothing. Its ACK of w1 as the lost connection delivered it is
	// dropped; w1 comes again, redelivered, and its ACK goes through.
	mq.ctl(t, "close_all_connections", "tether interop test")
	awaitLog(t, tt.log, reconnectWait, "upstream confirmed")
	app.live(t, reconnectWait, "tick-2")
	if ev := app.awaitNth(t, "work", "w1", 1); !ev.Redelivered {
		t.Errorf("w1 came again without redelivered:true: %+v", ev)
	}
	app.cmd(t, map[string]any{"cmd": "ack", "body": "w1", "which": 0})
	awaitLog(t, tt.log, messageWait, "app settles a message of a lost connection, not sent")
	app.cmd(t, map[string]any{"cmd": "ack", "body": "w1", "which": 1})
	app.receipted(t, "s2")
	app.await(t, messageWait, "the receipt of s2", receipt("r-s2"))
	app.awaitNth(t, "sends", "s2", 0)

	// SIGKILL: the restart takes longer than the app's heart-beat timeout
	// (an Erlang VM boots), and tether's heart-beats keep the app. During
	// the outage the app sends with receipts and starts a subscription.
	app.receipted(t, "s3") // in flight, or queued
	mq.kill()
	awaitLog(t, tt.log, messageWait, "upstream reconnect scheduled")
	app.receipted(t, "s4")
	app.cmd(t, map[string]any{"cmd": "subscribe", "id": "late", "dest": "/topic/late"})
	start := time.Now()
	mq.start(t)
	if down := time.Since(start); down < 3*stompBeat {
		t.Errorf("the broker was down %v only, not longer than the app's heart-beat timeout (2 to 3 × %v)", down, stompBeat)
	} else {
		t.Logf("the broker was down %v (its restart), the app's heart-beat timeout is 2 to 3 × %v", down, stompBeat)
	}
	for _, r := range []string{"r-s3", "r-s4"} {
		if !app.receipts[r] {
			app.await(t, reconnectWait, "the receipt of "+r, receipt(r))
		}
	}
	app.live(t, messageWait, "tick-3")
	app.cmd(t, map[string]any{"cmd": "send", "dest": "/topic/late", "body": "late-1"})
	app.await(t, messageWait, "the subscription started during the outage", message("late", "late-1"))

	// Every receipted send reached the queue at least once. s1 and s2 came
	// before the faults. s4, queued by tether during the outage, and s5
	// went to the restarted broker only, after the replayed subscription;
	// s4 comes before s5 on it. s3 raced the SIGKILL: tether re-sent it to
	// the restarted broker unless the killed one confirmed it first, and
	// then the copy that broker delivered (ack:auto: at most once) may have
	// died with it; its RECEIPT, awaited above, is tether's part.
	app.receipted(t, "s5")
	app.await(t, messageWait, "the receipt of s5", receipt("r-s5"))
	app.awaitNth(t, "sends", "s5", 0)
	got := map[string]int{}
	for _, b := range app.bySub["sends"] {
		got[b]++
	}
	for _, b := range []string{"s1", "s2", "s4", "s5"} {
		if got[b] == 0 {
			t.Errorf("receipted send %s never reached the subscription on its queue (got %v)", b, got)
		}
	}
	if n := len(app.bySub["gone"]); n > 0 {
		t.Errorf("the unsubscribed subscription came back: %v", app.bySub["gone"])
	}
	if app.connected != 1 {
		t.Errorf("the app saw %d CONNECTED, want 1", app.connected)
	}
	// w1 came twice before the SIGKILL: delivered, then redelivered once its
	// ACK on the lost connection was dropped. The SIGKILL may bring it back
	// a third time: RabbitMQ writes the acknowledgement of a persistent
	// message to disk lazily, and a crash forgets it (at least once).
	if w := app.bySub["work"]; len(w) < 2 || len(w) > 3 {
		t.Errorf("work messages %v, want w1 twice, or three times after the crash", w)
	}
}
