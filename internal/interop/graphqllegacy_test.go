package interop

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/protocol/graphqllegacy"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The graphql-ws-legacy peers: subscriptions-transport-ws 0.11 (server and
// client) from npm, with graphql 16 (it supports 15.7 and 16) and ws 8 as
// the client's WebSocket, in testdata/node_modules like ws.
const legacyInstall = "npm install --no-audit --no-fund --no-save --prefix internal/interop/testdata ws@8 graphql@16 subscriptions-transport-ws@0.11"

var legacyOnce = sync.OnceValues(func() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(node, "-e", `process.stdout.write(require("subscriptions-transport-ws/package.json").version + " " + require("graphql/package.json").version)`)
	cmd.Dir = "testdata"
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("subscriptions-transport-ws and graphql are not in testdata/node_modules: %w", err)
	}
	if stws, gql, _ := strings.Cut(string(out), " "); !strings.HasPrefix(stws, "0.11.") || !strings.HasPrefix(gql, "16.") {
		return "", fmt.Errorf("subscriptions-transport-ws %s and graphql %s in testdata/node_modules, want 0.11.x and 16.x", stws, gql)
	}
	return node + "\x00" + string(out), nil
})

// The server's ka cadence, and the client's timeout: it checks every
// timeout that a ka came since its last check, and closes its socket when
// none did. Against tether's ka every graphqllegacy.KeepaliveEvery (1 s)
// during an outage, a timeout of three of them leaves room for a machine
// under load; the default is 30 s.
const (
	legacyKA      = 200 * time.Millisecond
	legacyTimeout = 3 * graphqllegacy.KeepaliveEvery
)

func startLegacyServer(t *testing.T, node string, port int) gqlServer {
	t.Helper()
	cmd := exec.Command(node, "graphqllegacy_server.cjs", fmt.Sprint(port), fmt.Sprint(legacyKA.Milliseconds()))
	cmd.Dir = "testdata"
	p := peer{startProc(t, "subscriptions-transport-ws server", cmd, false)}
	ev := p.await(t, startWait, "the server listening", is("listening"))
	return gqlServer{peer: p, port: ev.Port}
}

// TestGraphQLWSLegacyPreset runs the real subscriptions-transport-ws client
// through tether with TETHER_PROTOCOL=graphql-ws-legacy to the real
// SubscriptionServer, across a TCP reset, a server close 1001 and restart,
// an outage longer than the client's ka timeout (during which it starts a
// subscription and a query), and a query and a mutation in flight when the
// connection drops. The app's socket never closes, sees one
// connection_ack, live subscriptions flow again, nothing the server ended
// runs twice, what the app stopped never comes back, and what was in
// flight ends with the preset's error, not run again.
func TestGraphQLWSLegacyPreset(t *testing.T) {
	found, err := legacyOnce()
	need(t, "Node.js with subscriptions-transport-ws 0.11 and graphql 16", legacyInstall, err)
	node, versions, _ := strings.Cut(found, "\x00")
	t.Logf("peers: subscriptions-transport-ws and graphql %s", versions)

	x := execs{}
	srv := startLegacyServer(t, node, 0)
	fp, err := upstreamtest.NewFaultProxy(fmt.Sprintf("127.0.0.1:%d", srv.port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	tt := startTether(t, "ws://"+fp.Addr()+"/graphql", socketFaults("TETHER_PROTOCOL=graphql-ws-legacy")...)
	cmd := exec.Command(node, "graphqllegacy_app.cjs", "ws://"+tt.addr+"/graphql", fmt.Sprint(legacyTimeout.Milliseconds()))
	cmd.Dir = "testdata"
	app := &gqlApp{peer: peer{startProc(t, "subscriptions-transport-ws app", cmd, false)}}
	if ev := app.await(t, "connected", is("connected")); ev.Protocol != graphqllegacy.Subprotocol {
		t.Fatalf("app connected with subprotocol %q, want %q", ev.Protocol, graphqllegacy.Subprotocol)
	}

	// Operations the server ends, and one live subscription.
	app.run(t, "ticks", "subscription { ticks }")
	app.await(t, "a tick", opEvent("next", "ticks"))
	app.run(t, "cd", "subscription { countdown(from: 3) }")
	app.await(t, "the countdown's end", opEvent("complete", "cd"))
	app.run(t, "q", "{ hello }")
	app.await(t, "the query's end", opEvent("complete", "q"))
	app.run(t, "m", "mutation { bump }")
	app.await(t, "the mutation's end", opEvent("complete", "m"))
	x.untilExec(t, srv, "bump")

	// A TCP reset: ticks flow again, nothing ended runs again.
	fp.ResetAll()
	x.untilExec(t, srv, "ticks")
	app.await(t, "a tick after the reset", opEvent("next", "ticks"))

	// The server closes with 1001 and comes back on the same port.
	srv.send(t, map[string]any{"cmd": "shutdown"})
	<-srv.exited
	srv = startLegacyServer(t, node, srv.port)
	x.untilExec(t, srv, "ticks")
	app.await(t, "a tick after the restart", opEvent("next", "ticks"))

	// An outage longer than the client's ka timeout: tether sends the ka.
	// Meanwhile the app starts a subscription and a query, sent once when
	// the server is back.
	port := srv.port
	srv.kill()
	outage := time.Now()
	for time.Since(outage) < 2*legacyTimeout {
		app.await(t, "a ka during the outage", is("ka"))
	}
	app.run(t, "cd2", "subscription { countdown(from: 2) }")
	app.run(t, "q2", "{ hello }")
	for again := time.Now(); time.Since(again) < legacyTimeout; {
		app.await(t, "a ka during the outage", is("ka"))
	}
	srv = startLegacyServer(t, node, port)
	app.await(t, "the query started during the outage", opEvent("complete", "q2"))
	app.await(t, "the countdown started during the outage", opEvent("complete", "cd2"))

	// A query and a mutation in flight when the connection drops: the app
	// gets the preset's error for each, and neither runs again.
	app.run(t, "slowq", "{ hello(delay: 60000) }")
	app.run(t, "slowm", "mutation { bump(delay: 60000) }")
	x.untilExec(t, srv, "bump-slow")
	fp.ResetAll()
	for _, id := range []string{"slowq", "slowm"} {
		ev := app.await(t, "the in-flight "+id+"'s error", opEvent("op-error", id))
		if !strings.Contains(ev.raw, "not re-run") {
			t.Errorf("in-flight %s ended with %s, want the preset's error", id, ev)
		}
	}
	app.await(t, "a tick after the reset", opEvent("next", "ticks"))

	// The app stops ticks; after the next reset it does not come back. The
	// reset comes once the server has the app's stop, and the query once
	// the new connection's connection_init is there.
	app.send(t, map[string]any{"cmd": "dispose", "id": "ticks"})
	x.until(t, srv, "the app's stop for ticks", is("client-stop"))
	fp.ResetAll()
	x.until(t, srv, "the connection_init after the last reset", is("init"))
	app.run(t, "q3", "{ hello }")
	app.await(t, "the query after the last reset", opEvent("complete", "q3"))
	x.untilExec(t, srv, "hello")

	want := execs{"ticks": 5, "countdown": 2, "hello": 3, "bump": 1, "hello-slow": 1, "bump-slow": 1}
	for op, n := range want {
		if x[op] != n {
			t.Errorf("the servers ran %s %d times, want %d (all: %v)", op, x[op], n, x)
		}
	}
	if app.acks != 1 {
		t.Errorf("the app saw %d connection_ack, want 1", app.acks)
	}
}
