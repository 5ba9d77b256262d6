package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The centrifuge preset's app: centrifuge-js 5 from npm, with ws 8, in
// testdata/node_modules like ws. The server is this test binary
// (centrifuge_server_test.go).
const centrifugeInstall = "npm install --no-audit --no-fund --no-save --prefix internal/interop/testdata ws@8 centrifuge@5"

var centrifugeOnce = sync.OnceValues(func() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", err
	}
	// Its package.json is not among its exports: read as a file.
	cmd := exec.Command(node, "-e", `process.stdout.write(JSON.parse(require("fs").readFileSync("node_modules/centrifuge/package.json")).version)`)
	cmd.Dir = "testdata"
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("centrifuge (centrifuge-js) is not in testdata/node_modules: %w", err)
	}
	if !strings.HasPrefix(string(out), "5.") {
		return "", fmt.Errorf("centrifuge %s in testdata/node_modules, want 5.x", out)
	}
	return node + "\x00" + string(out), nil
})

// The server's ping interval, and the app's maxServerPingDelay: it gives
// its connection up when nothing came for their sum, three of tether's
// pings during an outage (centrifuge.KeepaliveEvery); the defaults are
// 25 s and 10 s.
const (
	cfPing        = 1 * time.Second
	cfMaxPingWait = 2 * time.Second
)

// cfServer is one server process: a broker, and so an epoch, of its own.
type cfServer struct {
	peer
	port int
}

func startCFServer(t *testing.T, port int) cfServer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s", cfServerEnv, port, cfPing))
	p := peer{startProc(t, "centrifuge server", cmd, false)}
	ev := p.await(t, startWait, "the server listening", is("listening"))
	return cfServer{peer: p, port: ev.Port}
}

// cfApp is the centrifuge-js process and what it saw of channel news.
type cfApp struct {
	peer
	connected int
	last      int64 // offset of the last publication, 0 after a reset of the stream
	pubs      int
}

// cfEvent is what the app prints beyond the common event fields.
type cfEvent struct {
	Offset        int64 `json:"offset"`
	N             int   `json:"n"`
	Recovered     bool  `json:"recovered"`
	WasRecovering bool  `json:"wasRecovering"`
}

// await returns the app's first event that match accepts. On the way every
// publication must follow the one before it (no gap, no duplicate), and
// the client must never disconnect, reconnect, or lose its subscription.
func (a *cfApp) await(t *testing.T, what string, match func(event, cfEvent) bool) (event, cfEvent) {
	t.Helper()
	deadline := time.Now().Add(messageWait)
	for {
		ev := a.next(t, time.Until(deadline), what)
		var cf cfEvent
		if err := json.Unmarshal([]byte(ev.raw), &cf); err != nil {
			t.Fatalf("app: %s: %v", ev, err)
		}
		switch ev.Event {
		case "connected":
			a.connected++
		case "connecting":
			if a.connected > 0 {
				t.Fatalf("app: its own reconnect fired (%s) while waiting for %s", ev, what)
			}
		case "disconnected", "unsubscribed", "client-error", "sub-error":
			t.Fatalf("app: %s while waiting for %s", ev, what)
		case "pub":
			if a.last != 0 && cf.Offset != a.last+1 {
				t.Fatalf("app: publication at offset %d after %d while waiting for %s", cf.Offset, a.last, what)
			}
			a.last = cf.Offset
			a.pubs++
		}
		if match(ev, cf) {
			return ev, cf
		}
	}
}

// pubs waits for n more publications, in order.
func (a *cfApp) more(t *testing.T, n int, after string) {
	t.Helper()
	until := a.pubs + n
	a.await(t, fmt.Sprintf("%d publications %s", n, after), func(event, cfEvent) bool { return a.pubs >= until })
}

func isCF(name string) func(event, cfEvent) bool {
	return func(e event, _ cfEvent) bool { return e.Event == name }
}

// TestCentrifugePreset runs the real centrifuge-js client through tether
// with TETHER_PROTOCOL=centrifuge to a real server built on the centrifuge
// library, publishing to a channel with history, across a TCP reset, a
// server restart that keeps its history, an outage longer than the
// client's ping timeout, and a server restart with a new broker (a new
// epoch). The client's own reconnect never fires and it sees one connect;
// across the first three its publications go on gap-free and
// duplicate-free, recovered by tether's replay; across the epoch change
// it is told, as a server would, that it must resubscribe, and its own
// resubscribe tells it the stream could not be recovered.
func TestCentrifugePreset(t *testing.T) {
	found, err := centrifugeOnce()
	need(t, "Node.js with centrifuge (centrifuge-js) 5", centrifugeInstall, err)
	node, version, _ := strings.Cut(found, "\x00")
	t.Logf("peers: centrifuge-js %s, github.com/centrifugal/centrifuge server", version)

	srv := startCFServer(t, 0)
	fp, err := upstreamtest.NewFaultProxy(fmt.Sprintf("127.0.0.1:%d", srv.port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	tt := startTether(t, "ws://"+fp.Addr()+"/connection/websocket", socketFaults("TETHER_PROTOCOL=centrifuge")...)
	cmd := exec.Command(node, "centrifuge_app.mjs", "ws://"+tt.addr+"/connection/websocket", fmt.Sprint(cfMaxPingWait.Milliseconds()))
	cmd.Dir = "testdata"
	app := &cfApp{peer: peer{startProc(t, "centrifuge-js app", cmd, false)}}
	app.await(t, "subscribed", isCF("subscribed"))
	app.more(t, 10, "after subscribing")

	// A TCP reset: tether replays connect and a recovering subscribe; what
	// was published meanwhile arrives inside the subscribe reply.
	fp.ResetAll()
	srv.await(t, messageWait, "the replayed subscribe after the reset", is("subscribe"))
	app.more(t, 20, "after the reset")

	// The server drops every client (3001 shutdown) and refuses connections
	// for a while, its history kept.
	srv.send(t, map[string]any{"cmd": "drop", "ms": 500})
	srv.await(t, messageWait, "the server listening again", is("listening"))
	srv.await(t, messageWait, "the replayed subscribe after the restart", is("subscribe"))
	app.more(t, 20, "after the restart")

	// An outage longer than the app's ping timeout: tether pings it.
	outage := 2 * (cfPing + cfMaxPingWait)
	srv.send(t, map[string]any{"cmd": "drop", "ms": outage.Milliseconds()})
	srv.await(t, outage+messageWait, "the server listening after the outage", is("listening"))
	srv.await(t, messageWait, "the replayed subscribe after the outage", is("subscribe"))
	app.more(t, 20, "after the outage")

	// A new server process: a new broker, a new epoch, offsets from 1. The
	// app is told to resubscribe (2500), and its resubscribe is answered
	// as not recovered.
	srv.kill()
	srv = startCFServer(t, srv.port)
	ev, _ := app.await(t, "the resubscribe notice after the epoch change", isCF("subscribing"))
	if ev.Code != 2500 {
		t.Errorf("app: %s, want code 2500 (insufficient state)", ev)
	}
	_, sub := app.await(t, "the resubscription after the epoch change", isCF("subscribed"))
	if sub.Recovered || !sub.WasRecovering {
		t.Errorf("app: resubscribed with recovered %v, wasRecovering %v: want a failed recovery", sub.Recovered, sub.WasRecovering)
	}
	app.last = 0 // a new stream
	app.more(t, 20, "after the epoch change")
	if app.connected != 1 {
		t.Errorf("app: %d connected events, want 1", app.connected)
	}
}
