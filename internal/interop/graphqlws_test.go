package interop

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/protocol/graphqlws"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The graphql-ws peers: the graphql-ws 6 server and client from npm (with
// graphql 16 and ws 8), in testdata/node_modules like ws.
const graphqlInstall = "npm install --no-audit --no-fund --no-save --prefix internal/interop/testdata ws@8 graphql-ws@6 graphql@16"

var graphqlOnce = sync.OnceValues(func() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(node, "-e", `process.stdout.write(require("graphql-ws/package.json").version + " " + require("graphql/package.json").version)`)
	cmd.Dir = "testdata"
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("graphql-ws and graphql are not in testdata/node_modules: %w", err)
	}
	if gws, gql, _ := strings.Cut(string(out), " "); !strings.HasPrefix(gws, "6.") || !strings.HasPrefix(gql, "16.") {
		return "", fmt.Errorf("graphql-ws %s and graphql %s in testdata/node_modules, want 6.x and 16.x", gws, gql)
	}
	return node + "\x00" + string(out), nil
})

// The app's keepalive: a ping every appKeepAlive, and the connection given up
// when its pong takes longer than appPongWait (graphql-ws's own recipe).
const (
	appKeepAlive = 200 * time.Millisecond
	appPongWait  = 1 * time.Second
)

// gqlServer is one graphql-ws server process.
type gqlServer struct {
	peer
	port int
}

func startGQLServer(t *testing.T, node string, port int) gqlServer {
	t.Helper()
	cmd := exec.Command(node, "graphqlws_server.mjs", fmt.Sprint(port))
	cmd.Dir = "testdata"
	p := peer{startProc(t, "graphql-ws server", cmd, false)}
	ev := p.await(t, startWait, "the server listening", is("listening"))
	return gqlServer{peer: p, port: ev.Port}
}

// gqlApp is the graphql-ws client process, with the counts of what it saw.
type gqlApp struct {
	peer
	acks int
}

// await returns the app's first event that match accepts, counting acks on
// the way; the client's closed event or its keepalive giving up fail the
// test: the app's socket must never close.
func (a *gqlApp) await(t *testing.T, what string, match func(event) bool) event {
	t.Helper()
	deadline := time.Now().Add(messageWait)
	for {
		ev := a.next(t, time.Until(deadline), what)
		switch ev.Event {
		case "ack":
			a.acks++
		case "close", "keepalive-timeout":
			t.Fatalf("app: %s while waiting for %s", ev, what)
		}
		if match(ev) {
			return ev
		}
	}
}

func (a *gqlApp) run(t *testing.T, id, query string) {
	t.Helper()
	a.send(t, map[string]any{"cmd": "run", "id": id, "query": query})
}

func opEvent(name, id string) func(event) bool {
	return func(e event) bool { return e.Event == name && e.raw != "" && strings.Contains(e.raw, `"id":"`+id+`"`) }
}

// execs counts the operations the servers ran, across restarts.
type execs map[string]int

// untilExec reads the server's events up to an exec of op, counting every
// exec on the way.
func (x execs) untilExec(t *testing.T, s gqlServer, op string) {
	t.Helper()
	x.until(t, s, "the server running "+op, func(e event) bool { return e.Event == "exec" && e.Op() == op })
}

// until reads the server's events up to the first that match accepts,
// counting every exec on the way.
func (x execs) until(t *testing.T, s gqlServer, what string, match func(event) bool) {
	t.Helper()
	s.await(t, messageWait, what, func(e event) bool {
		if e.Event == "exec" {
			x[e.Op()]++
		}
		return match(e)
	})
}

// Op is the operation of an exec event (its "op" field).
func (e event) Op() string {
	_, rest, ok := strings.Cut(e.raw, `"op":"`)
	if !ok {
		return ""
	}
	op, _, _ := strings.Cut(rest, `"`)
	return op
}

// TestGraphQLWSPreset runs the real graphql-ws client through tether with
// TETHER_PROTOCOL=graphql-ws to the real graphql-ws server, across a TCP
// reset, a server close 1001 and restart, an outage longer than the app's
// keepalive (during which it starts a subscription and a query), and a query
// and a mutation in flight when the connection drops. The app's socket never
// closes, sees one connection_ack, live subscriptions flow again, nothing the
// server ended runs twice, what the app ended never comes back, and what
// was in flight ends with the preset's error, not run again.
func TestGraphQLWSPreset(t *testing.T) {
	found, err := graphqlOnce()
	need(t, "Node.js with graphql-ws 6 and graphql 16", graphqlInstall, err)
	node, versions, _ := strings.Cut(found, "\x00")
	t.Logf("peers: graphql-ws and graphql %s", versions)

	x := execs{}
	srv := startGQLServer(t, node, 0)
	fp, err := upstreamtest.NewFaultProxy(fmt.Sprintf("127.0.0.1:%d", srv.port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	tt := startTether(t, "ws://"+fp.Addr()+"/graphql", socketFaults("TETHER_PROTOCOL=graphql-ws")...)
	cmd := exec.Command(node, "graphqlws_app.mjs", "ws://"+tt.addr+"/graphql",
		fmt.Sprint(appKeepAlive.Milliseconds()), fmt.Sprint(appPongWait.Milliseconds()))
	cmd.Dir = "testdata"
	app := &gqlApp{peer: peer{startProc(t, "graphql-ws app", cmd, false)}}
	if ev := app.await(t, "connected", is("connected")); ev.Protocol != graphqlws.Subprotocol {
		t.Fatalf("app connected with subprotocol %q, want %q", ev.Protocol, graphqlws.Subprotocol)
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
	srv = startGQLServer(t, node, srv.port)
	x.untilExec(t, srv, "ticks")
	app.await(t, "a tick after the restart", opEvent("next", "ticks"))

	// An outage longer than the app's pong timeout: tether answers its pings.
	// Meanwhile the app starts a subscription and a query, sent once when
	// the server is back.
	port := srv.port
	srv.kill()
	for pongs := 0; pongs*int(appKeepAlive) < 2*int(appPongWait); pongs++ {
		app.await(t, "a pong during the outage", is("pong"))
	}
	app.run(t, "cd2", "subscription { countdown(from: 2) }")
	app.run(t, "q2", "{ hello }")
	for pongs := 0; pongs*int(appKeepAlive) < int(appPongWait); pongs++ {
		app.await(t, "a pong during the outage", is("pong"))
	}
	srv = startGQLServer(t, node, port)
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

	// The app ends ticks; after the next reset it does not come back: the
	// query sent after the restore runs with no ticks before it. The reset
	// comes once the server has the app's complete, and the query once the
	// new connection's connection_init is there: sent earlier, it could go
	// out on the connection being reset, and end with the preset's error.
	app.send(t, map[string]any{"cmd": "dispose", "id": "ticks"})
	x.until(t, srv, "the app's complete for ticks", is("client-complete"))
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
