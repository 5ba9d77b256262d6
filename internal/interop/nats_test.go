package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The NATS peers: Debian's nats-server (its websocket listener) and the
// nats.ws 1 client from npm, with ws 8, in testdata/node_modules.
const (
	natsServerInstall = "apt-get install -y nats-server"
	natsInstall       = "npm install --no-audit --no-fund --no-save --prefix internal/interop/testdata ws@8 nats.ws@1"
)

var natsOnce = sync.OnceValues(func() (string, error) {
	server, err := exec.LookPath("nats-server")
	if err != nil {
		return "", err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(node, "-e", `const fs = require("fs"); process.stdout.write(JSON.parse(fs.readFileSync("node_modules/nats.ws/package.json")).version)`)
	cmd.Dir = "testdata"
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("nats.ws is not in testdata/node_modules: %w", err)
	}
	if !strings.HasPrefix(string(out), "1.") {
		return "", fmt.Errorf("nats.ws %s in testdata/node_modules, want 1.x", out)
	}
	return server + "\x00" + node + "\x00" + string(out), nil
})

// natsPing is the app's PING interval: nats.ws gives the connection up as
// stale when two go unanswered.
const natsPing = 500 * time.Millisecond

// natsServer is a nats-server with its websocket listener on loopback.
type natsServer struct {
	bin, conf string
	ws        int
	proc      *proc
}

func newNATSServer(t *testing.T, bin string) *natsServer {
	t.Helper()
	p := freePorts(t, 2)
	s := &natsServer{bin: bin, conf: filepath.Join(t.TempDir(), "nats.conf"), ws: p[1]}
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nwebsocket {\n  listen: \"127.0.0.1:%d\"\n  no_tls: true\n}\n", p[0], p[1])
	if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	return s
}

func (s *natsServer) start(t *testing.T) {
	t.Helper()
	s.proc = startProc(t, "nats-server", exec.Command(s.bin, "-c", s.conf), true)
	awaitLine(t, s.proc, startWait, "Server is ready")
}

// natsEvent is one line of nats_app.mjs.
type natsEvent struct {
	Event   string `json:"event"`
	Sub     string `json:"sub"`
	Subject string `json:"subject"`
	Data    string `json:"data"`
	ID      string `json:"id"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

// natsApp is the nats.ws process, with what it saw.
type natsApp struct {
	peer
	infos int
	got   map[string][]string // message data by subscription id
}

// await returns the first event match accepts, recording messages and
// INFOs on the way; a close or a disconnect fails the test.
func (a *natsApp) await(t *testing.T, what string, match func(natsEvent) bool) natsEvent {
	t.Helper()
	deadline := time.Now().Add(messageWait)
	for {
		raw := a.next(t, time.Until(deadline), what).raw
		var ev natsEvent
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			t.Fatalf("app: %q: %v", raw, err)
		}
		switch {
		case ev.Event == "info":
			a.infos++
		case ev.Event == "msg":
			a.got[ev.Sub] = append(a.got[ev.Sub], ev.Data)
		case ev.Event == "close", ev.Event == "status" && (ev.Type == "disconnect" || ev.Type == "error" || ev.Type == "staleConnection"):
			t.Fatalf("app: %s while waiting for %s", raw, what)
		}
		if match(ev) {
			return ev
		}
	}
}

func natsMsg(sub, data string) func(natsEvent) bool {
	return func(e natsEvent) bool { return e.Event == "msg" && e.Sub == sub && e.Data == data }
}

// live publishes on the live subscription's subject (and the unsubscribed
// one's first) and waits for it.
func (a *natsApp) live(t *testing.T, data string) {
	t.Helper()
	a.send(t, map[string]any{"cmd": "pub", "subject": "gone", "data": "gone-" + data})
	a.send(t, map[string]any{"cmd": "pub", "subject": "ticks", "data": data})
	a.await(t, "the live subscription's "+data, natsMsg("live", data))
}

// TestNATSPreset runs the real nats.ws client through tether with
// TETHER_PROTOCOL=nats to a real nats-server, across two SIGKILLs and
// restarts, the second longer than the app's ping timeout, during which it
// publishes and subscribes. The app never closes and sees one INFO; the
// live subscription flows again, one started during the outage too, the
// one it unsubscribed never comes back; a SUB and a PUB sent in one
// WebSocket message are replayed as the SUB alone (the PUB's message
// arrives once); what the app published during the outage reaches the
// server.
func TestNATSPreset(t *testing.T) {
	found, err := natsOnce()
	need(t, "nats-server and Node.js with nats.ws 1", natsServerInstall+"; "+natsInstall, err)
	parts := strings.Split(found, "\x00")
	server, node := parts[0], parts[1]
	t.Logf("peers: nats.ws %s, %s", parts[2], server)

	srv := newNATSServer(t, server)
	tt := startTether(t, fmt.Sprintf("ws://127.0.0.1:%d", srv.ws), socketFaults("TETHER_PROTOCOL=nats", "TETHER_LOG_LEVEL=debug")...)
	cmd := exec.Command(node, "nats_app.mjs", "ws://"+tt.addr, fmt.Sprint(natsPing.Milliseconds()))
	cmd.Dir = "testdata"
	app := &natsApp{peer: peer{startProc(t, "nats.ws app", cmd, false)}, got: map[string][]string{}}
	app.await(t, "connected", func(e natsEvent) bool { return e.Event == "connected" })

	app.send(t, map[string]any{"cmd": "sub", "id": "live", "subject": "ticks"})
	app.send(t, map[string]any{"cmd": "sub", "id": "gone", "subject": "gone"})
	app.send(t, map[string]any{"cmd": "sub", "id": "sends", "subject": "sends"})
	app.send(t, map[string]any{"cmd": "subpub", "id": "once", "subject": "once", "data": "p"})
	app.await(t, "the subpub's message", natsMsg("once", "p"))
	app.send(t, map[string]any{"cmd": "unsub", "id": "gone"})
	app.live(t, "tick-1")

	// A SIGKILL and a quick restart.
	srv.proc.kill()
	awaitLog(t, tt.log, messageWait, "upstream reconnect scheduled")
	srv.start(t)
	app.live(t, "tick-2")

	// A SIGKILL for longer than the app's ping timeout: tether answers its
	// PINGs. Meanwhile it publishes and subscribes.
	srv.proc.kill()
	awaitLog(t, tt.log, messageWait, "upstream reconnect scheduled")
	app.send(t, map[string]any{"cmd": "pub", "subject": "sends", "data": "s1"})
	app.send(t, map[string]any{"cmd": "sub", "id": "late", "subject": "late"})
	for range 4 { // 4 × natsPing, more than the 2 the app allows
		awaitLog(t, tt.log, messageWait, "app keepalive answered while the upstream is down")
	}
	app.send(t, map[string]any{"cmd": "pub", "subject": "sends", "data": "s2"})
	srv.start(t)
	app.await(t, "s1, published during the outage", natsMsg("sends", "s1"))
	app.await(t, "s2, published during the outage", natsMsg("sends", "s2"))
	app.live(t, "tick-3")
	app.send(t, map[string]any{"cmd": "pub", "subject": "late", "data": "late-1"})
	app.await(t, "the subscription started during the outage", natsMsg("late", "late-1"))
	app.send(t, map[string]any{"cmd": "flush", "id": "end"})
	app.await(t, "the last flush", func(e natsEvent) bool { return e.Event == "flushed" && e.ID == "end" })

	if g := app.got["gone"]; len(g) > 0 {
		t.Errorf("the unsubscribed subscription came back: %v", g)
	}
	if o := app.got["once"]; len(o) != 1 {
		t.Errorf("the PUB sent with a SUB in one message arrived %d times (%v), want once: the replay sent it again", len(o), o)
	}
	if app.infos != 1 {
		t.Errorf("the app saw %d INFO, want 1", app.infos)
	}
}
