package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The mqtt preset's peers: Debian's mosquitto broker (a WebSocket listener
// on a free loopback port, its own configuration and persistence directory)
// and the mqtt.js client from npm (mqtt 5, in testdata/node_modules), as the
// app through tether and as a witness connected to the broker directly.
const (
	mosquittoInstall = "apt-get install mosquitto"
	mqttInstall      = "npm install --no-audit --no-fund --no-save --prefix internal/interop/testdata mqtt@5"
)

// mqttKeepalive is the app's keepalive: mqtt.js (5.16) sends a PINGREQ a
// keepalive after the last acknowledgement or PINGRESP it received, and
// gives the connection up when its PINGRESP has not come within half a
// keepalive more; a broker closes a client silent for 1.5 times as long
// (MQTT 5 §3.1.2.10). The outages below last longer than both.
//
// tether's heartbeat is what finds the stall (bytes held both ways): it
// declares the connection dead at most mqttPingInterval + mqttPingTimeout
// after the last frame, and only then answers the PINGREQ the app sent
// into the stall. That PINGREQ may leave right as the stall begins, so
// the two must fit in the half keepalive the app waits for its PINGRESP,
// with mqttSlack left for a loaded machine (tether's wake-up, the answer's
// way to the app): a keepalive of 2 s leaves nothing beyond an interval
// and a timeout of 500 ms. The keepalive is whole seconds (MQTT's unit);
// within it, the timeout is as long as the stall allows, so that a pong
// the broker sends late on a loaded machine does not end a healthy
// connection, which loses what the broker was delivering to the app's
// clean session.
const (
	mqttKeepalive    = 6 * time.Second
	mqttOutage       = 2 * mqttKeepalive
	mqttPingInterval = 500 * time.Millisecond
	mqttSlack        = time.Second
	mqttPingTimeout  = mqttKeepalive/2 - mqttPingInterval - mqttSlack
)

// mqttTether is tether's configuration in the mqtt tests: the preset, the
// heartbeat above, and a dial timeout of 2 s, so that a dial held by the
// stall is given up and made again, as one to an unreachable broker.
var mqttTether = []string{"TETHER_PROTOCOL=mqtt", "TETHER_PING_INTERVAL=" + mqttPingInterval.String(),
	"TETHER_PING_TIMEOUT=" + mqttPingTimeout.String(), "TETHER_DIAL_TIMEOUT=2s"}

var mosquittoOnce = sync.OnceValues(func() (string, error) {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/mosquitto"); statErr != nil {
			return "", err
		}
		bin = "/usr/sbin/mosquitto"
	}
	return bin, nil
})

var mqttJSOnce = sync.OnceValues(func() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(node, "-e", `process.stdout.write(require("mqtt/package.json").version)`)
	cmd.Dir = "testdata"
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("mqtt is not in testdata/node_modules: %w", err)
	}
	if !strings.HasPrefix(string(out), "5.") {
		return "", fmt.Errorf("mqtt %s in testdata/node_modules, want 5.x", out)
	}
	return node + "\x00" + string(out), nil
})

// broker is one mosquitto process; restart starts the next on the same
// port, configuration and persistence directory.
type broker struct {
	bin, conf string
	port      int
	p         *proc
}

func startBroker(t *testing.T, bin string) *broker {
	t.Helper()
	dir := t.TempDir()
	port, mqttPort := freePort(t), freePort(t)
	conf := []string{
		// mosquitto 2.0.11 refuses to start with a WebSocket listener
		// alone ("Unable to start any listening sockets"): a plain MQTT
		// listener goes first.
		fmt.Sprintf("listener %d 127.0.0.1", mqttPort),
		fmt.Sprintf("listener %d 127.0.0.1", port),
		"protocol websockets",
		"socket_domain ipv4", // libwebsockets binds IPv6 otherwise, which a machine may lack
		"allow_anonymous true",
		"persistence true",
		"persistence_location " + dir + "/",
		"log_dest stderr", // unbuffered, unlike stdout into a pipe
		"log_type error", "log_type warning", "log_type notice", "log_type information",
	}
	if os.Getuid() == 0 {
		conf = append(conf, "user root") // else it drops to user mosquitto, who cannot write dir
	}
	b := &broker{bin: bin, conf: filepath.Join(dir, "mosquitto.conf"), port: port}
	if err := os.WriteFile(b.conf, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.restart(t)
	return b
}

// restart starts mosquitto and waits for it to say it runs.
func (b *broker) restart(t *testing.T) {
	t.Helper()
	b.p = startProc(t, "mosquitto", exec.Command(b.bin, "-c", b.conf), true)
	deadline := time.Now().Add(startWait)
	for {
		line := string(b.p.nextLine(t, time.Until(deadline), "mosquitto running"))
		if strings.Contains(line, " running") {
			return
		}
	}
}

func (b *broker) url() string { return fmt.Sprintf("ws://127.0.0.1:%d/mqtt", b.port) }

// mqEvent is an mqtt_client.mjs event with its MQTT fields.
type mqEvent struct {
	Event, Topic, Payload, Error string
	raw                          string
}

// mqClient is one mqtt_client.mjs process and what it saw: the CONNACKs it
// took as connections and the messages per topic and payload.
type mqClient struct {
	peer
	name     string
	connects int
	got      map[string]int // "topic payload" → times received
	// disconnects counts the MQTT 5 DISCONNECTs from the server it got.
	disconnects int
	// acks are the acknowledgement events (published, subscribed,
	// unsubscribed) read and not yet expected: they come in the broker's
	// order, which is not the order the test looks for them in.
	acks []mqEvent
	// final: a close, offline or error fails the test (the app); the
	// witness reconnects and may see them.
	final bool
}

func startMQTTClient(t *testing.T, node, name, url string, version int, reconnect time.Duration, final bool, session ...string) *mqClient {
	t.Helper()
	args := []string{"mqtt_client.mjs", url, fmt.Sprint(version), fmt.Sprint(int(mqttKeepalive.Seconds())),
		fmt.Sprint(reconnect.Milliseconds()), fmt.Sprintf("%s-%d", name, version)}
	cmd := exec.Command(node, append(args, session...)...)
	cmd.Dir = "testdata"
	c := &mqClient{peer: peer{startProc(t, "mqtt.js "+name, cmd, false)}, name: name, got: map[string]int{}, final: final}
	// Node loading mqtt.js is a peer's start, then the connection.
	c.awaitWithin(t, startWait+messageWait, "connected", func(e mqEvent) bool { return e.Event == "connect" })
	return c
}

// await reads the client's events up to the first that match accepts,
// counting connections and messages on the way.
func (c *mqClient) await(t *testing.T, what string, match func(mqEvent) bool) mqEvent {
	t.Helper()
	return c.awaitWithin(t, messageWait, what, match)
}

func (c *mqClient) awaitWithin(t *testing.T, wait time.Duration, what string, match func(mqEvent) bool) mqEvent {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		line := c.nextLine(t, time.Until(deadline), c.name+": "+what)
		ev := mqEvent{raw: string(line)}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("%s printed %q", c.name, line)
		}
		switch ev.Event {
		case "connect":
			c.connects++
		case "message":
			c.got[ev.Topic+" "+ev.Payload]++
		case "disconnect":
			c.disconnects++
		case "published", "subscribed", "unsubscribed":
			c.acks = append(c.acks, ev)
		case "close", "offline", "error":
			if c.final {
				t.Fatalf("%s: %s while waiting for %s", c.name, ev.raw, what)
			}
		}
		if ev.Error != "" {
			t.Fatalf("%s: %s while waiting for %s", c.name, ev.raw, what)
		}
		if match(ev) {
			return ev
		}
	}
}

// acked waits for an acknowledgement event that match accepts, read now
// or before, and consumes it.
func (c *mqClient) acked(t *testing.T, what string, match func(mqEvent) bool) {
	t.Helper()
	for {
		for i, ev := range c.acks {
			if match(ev) {
				c.acks = append(c.acks[:i], c.acks[i+1:]...)
				return
			}
		}
		c.await(t, what, match)
	}
}

func (c *mqClient) sub(t *testing.T, topic string) {
	t.Helper()
	c.send(t, map[string]any{"cmd": "sub", "topic": topic, "qos": 1})
}

func (c *mqClient) subscribed(t *testing.T, topic string) {
	t.Helper()
	c.sub(t, topic)
	c.acked(t, "subscribed to "+topic, mqIs("subscribed", topic, ""))
}

func (c *mqClient) pub(t *testing.T, topic, payload string) {
	t.Helper()
	c.send(t, map[string]any{"cmd": "pub", "topic": topic, "payload": payload, "qos": 1})
}

// message waits for a message on topic with payload.
func (c *mqClient) message(t *testing.T, topic, payload string) {
	t.Helper()
	if c.got[topic+" "+payload] > 0 {
		return
	}
	c.await(t, "the message "+topic+" "+payload, mqIs("message", topic, payload))
}

func mqIs(event, topic, payload string) func(mqEvent) bool {
	return func(e mqEvent) bool {
		return e.Event == event && e.Topic == topic && (payload == "" || e.Payload == payload)
	}
}

// TestMQTTPreset runs mqtt.js through tether with TETHER_PROTOCOL=mqtt to
// mosquitto, in MQTT 3.1.1 and 5, across a broker SIGKILLed for longer
// than 1.5 × the app's keepalive and restarted (the app subscribes and
// publishes meanwhile), a TCP reset, a connection stalled as long, and a
// graceful restart (SIGTERM).
// The app's connection never closes, it sees one CONNACK, its live
// subscriptions flow again, what it unsubscribed never comes back, and
// every QoS 1 publish reaches the broker at least once (the witness, a
// second mqtt.js client connected to the broker directly, gets it). With a
// persistent session, what the broker queued meanwhile reaches the app.
func TestMQTTPreset(t *testing.T) {
	bin, err := mosquittoOnce()
	need(t, "mosquitto", mosquittoInstall, err)
	found, err := mqttJSOnce()
	need(t, "Node.js with mqtt 5", mqttInstall, err)
	node, version, _ := strings.Cut(found, "\x00")
	t.Logf("peers: %s, mqtt.js %s", bin, version)
	for _, v := range []struct {
		name    string
		version int
	}{{"3.1.1", 4}, {"5", 5}} {
		t.Run(v.name, func(t *testing.T) { mqttFaults(t, bin, node, v.version) })
		t.Run(v.name+" persistent", func(t *testing.T) { mqttPersistent(t, bin, node, v.version) })
	}
}

func mqttFaults(t *testing.T, bin, node string, version int) {
	b := startBroker(t, bin)
	fp, err := upstreamtest.NewFaultProxy(fmt.Sprintf("127.0.0.1:%d", b.port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	tt := startTether(t, "ws://"+fp.Addr()+"/mqtt", mqttTether...)
	witness := startMQTTClient(t, node, "witness", b.url(), version, 100*time.Millisecond, false)
	witness.subscribed(t, "pub/#")
	app := startMQTTClient(t, node, "app", tt.url()+"mqtt", version, 0, true)
	app.subscribed(t, "live/a")
	app.subscribed(t, "gone/b")
	app.send(t, map[string]any{"cmd": "unsub", "topic": "gone/b"})
	app.acked(t, "unsubscribed from gone/b", mqIs("unsubscribed", "gone/b", ""))
	witness.pub(t, "live/a", "before")
	app.message(t, "live/a", "before")

	// The broker SIGKILLed for longer than 1.5 × keepalive: tether answers
	// the app's PINGREQs; the app publishes and subscribes meanwhile. The
	// restarted broker is kept from tether until the witness is back on
	// it, so that the witness is there to see what tether sends first.
	b.p.kill()
	down := time.Now()
	app.pub(t, "pub/kill", "k1")
	app.sub(t, "late/c")
	for time.Since(down) < mqttOutage {
		app.await(t, "a PINGRESP during the outage", func(e mqEvent) bool { return e.Event == "pingresp" })
	}
	fp.RefuseNew(true)
	b.restart(t)
	witness.await(t, "its resubscription after the restart", func(e mqEvent) bool { return e.Event == "suback" })
	fp.RefuseNew(false)
	witness.message(t, "pub/kill", "k1")
	app.acked(t, "the publish during the outage acknowledged", mqIs("published", "pub/kill", "k1"))
	app.acked(t, "the subscription during the outage", mqIs("subscribed", "late/c", ""))
	flows(t, witness, app, "after the restart")

	// A TCP reset, and a publish right after it.
	fp.ResetAll()
	app.pub(t, "pub/reset", "r1")
	witness.message(t, "pub/reset", "r1")
	app.acked(t, "the publish after the reset acknowledged", mqIs("published", "pub/reset", "r1"))
	flows(t, witness, app, "after the reset")

	// The connection stalled (bytes held both ways) for as long: tether's
	// WebSocket ping finds it dead; the app's PINGREQs are answered.
	fp.Blackhole(true)
	stalled := time.Now()
	app.pub(t, "pub/stall", "s1")
	for time.Since(stalled) < mqttOutage {
		app.await(t, "a PINGRESP during the stall", func(e mqEvent) bool { return e.Event == "pingresp" })
	}
	fp.Blackhole(false)
	witness.message(t, "pub/stall", "s1")
	app.acked(t, "the publish during the stall acknowledged", mqIs("published", "pub/stall", "s1"))
	flows(t, witness, app, "after the stall")

	// A graceful restart: SIGTERM, on which mosquitto saves its state and
	// sends MQTT 5 clients a DISCONNECT (server shutting down), which
	// reaches the app; then at once a new broker.
	if err := b.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-b.p.exited
	fp.RefuseNew(true)
	b.restart(t)
	witness.await(t, "its resubscription after the graceful restart", func(e mqEvent) bool { return e.Event == "suback" })
	fp.RefuseNew(false)
	app.pub(t, "pub/term", "t1")
	witness.message(t, "pub/term", "t1")
	app.acked(t, "the publish after the graceful restart acknowledged", mqIs("published", "pub/term", "t1"))
	flows(t, witness, app, "after the graceful restart")

	if app.connects != 1 {
		t.Errorf("the app saw %d CONNACKs, want 1", app.connects)
	}
	for msg, n := range app.got {
		if strings.HasPrefix(msg, "gone/b ") {
			t.Errorf("the app got %q %d times after unsubscribing", msg, n)
		}
	}
	t.Logf("witness got %v; app got %v and %d DISCONNECTs", witness.got, app.got, app.disconnects)
}

// flows checks that the app's live subscriptions flow: the witness
// publishes on the unsubscribed topic first, then on each live one; the
// app gets the live ones, in order after the other, which it never gets.
func flows(t *testing.T, witness, app *mqClient, when string) {
	t.Helper()
	witness.pub(t, "gone/b", when)
	witness.pub(t, "late/c", when)
	witness.pub(t, "live/a", when)
	app.message(t, "late/c", when)
	app.message(t, "live/a", when)
	if n := app.got["gone/b "+when]; n > 0 {
		t.Errorf("%s: the app got gone/b, which it unsubscribed", when)
	}
}

// mqttPersistent: an app with a session the broker keeps (clean session 0,
// or clean start 0 with a session expiry). While tether cannot reach the
// broker, the broker queues what is published on the app's subscription,
// and the app gets it once tether is back, on the one connection it saw
// open; what it unsubscribed does not come back, though tether replays the
// subscriptions to a broker that kept them.
func mqttPersistent(t *testing.T, bin, node string, version int) {
	b := startBroker(t, bin)
	fp, err := upstreamtest.NewFaultProxy(fmt.Sprintf("127.0.0.1:%d", b.port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	tt := startTether(t, "ws://"+fp.Addr()+"/mqtt", mqttTether...)
	witness := startMQTTClient(t, node, "witness", b.url(), version, 100*time.Millisecond, false)
	app := startMQTTClient(t, node, "app", tt.url()+"mqtt", version, 0, true, "persistent")
	app.subscribed(t, "live/a")
	app.subscribed(t, "gone/b")
	app.send(t, map[string]any{"cmd": "unsub", "topic": "gone/b"})
	app.acked(t, "unsubscribed from gone/b", mqIs("unsubscribed", "gone/b", ""))

	fp.RefuseNew(true)
	fp.ResetAll()
	witness.pub(t, "gone/b", "while away")
	witness.pub(t, "live/a", "while away")
	witness.acked(t, "its publish acknowledged", mqIs("published", "live/a", "while away"))
	fp.RefuseNew(false)
	app.message(t, "live/a", "while away")
	witness.pub(t, "live/a", "back")
	app.message(t, "live/a", "back")
	if app.connects != 1 || app.got["gone/b while away"] > 0 {
		t.Errorf("the app saw %d CONNACKs and got %v; want 1 and nothing on gone/b", app.connects, app.got)
	}
}
