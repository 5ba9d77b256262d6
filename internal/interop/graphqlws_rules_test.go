package interop

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// graphqlWSRules is graphql-ws written as TETHER_* rules, without the
// preset: the recipe of docs/protocols.md, with the rules real protocols
// showed missing (an operation the server ended, the client's pings).
var graphqlWSRules = []string{
	`TETHER_AUTH_MATCH={"type":"connection_init"}`,
	`TETHER_AUTH_OK_MATCH={"type":"connection_ack"}`,
	`TETHER_CONFIRM_MATCH={"type":"connection_ack"}`,
	`TETHER_HIDE_ON_RECONNECT_MATCH={"type":"connection_ack"}`,
	`TETHER_SUBSCRIBE_MATCH={"type":"subscribe"}`,
	`TETHER_UNSUBSCRIBE_MATCH={"type":"complete"}`,
	`TETHER_SUBSCRIPTION_KEY=id`,
	`TETHER_SUBSCRIPTION_END_MATCH=re:"type":"(complete|error)"`,
	`TETHER_APP_PING_MATCH={"type":"ping"}`,
	`TETHER_APP_PONG_MESSAGE={"type":"pong"}`,
}

// TestGraphQLWSRules runs the real graphql-ws client through tether with the
// generic rules to the real graphql-ws server: across a TCP reset and an
// outage longer than the client's pong timeout, tether answers the client's
// pings (TETHER_APP_PING_MATCH), so its socket never closes; the live
// subscription flows again and what the server completed
// (TETHER_SUBSCRIPTION_END_MATCH) never runs again.
func TestGraphQLWSRules(t *testing.T) {
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
	tt := startTether(t, "ws://"+fp.Addr()+"/graphql", socketFaults(graphqlWSRules...)...)
	cmd := exec.Command(node, "graphqlws_app.mjs", "ws://"+tt.addr+"/graphql",
		fmt.Sprint(appKeepAlive.Milliseconds()), fmt.Sprint(appPongWait.Milliseconds()))
	cmd.Dir = "testdata"
	app := &gqlApp{peer: peer{startProc(t, "graphql-ws app", cmd, false)}}
	app.await(t, "connected", is("connected"))

	app.run(t, "ticks", "subscription { ticks }")
	app.await(t, "a tick", opEvent("next", "ticks"))
	app.run(t, "cd", "subscription { countdown(from: 3) }")
	app.await(t, "the countdown's end", opEvent("complete", "cd"))
	x.untilExec(t, srv, "countdown")

	fp.ResetAll()
	x.untilExec(t, srv, "ticks")
	app.await(t, "a tick after the reset", opEvent("next", "ticks"))

	// An outage of twice the client's pong timeout: its pings are answered.
	port := srv.port
	srv.kill()
	for pongs := 0; pongs*int(appKeepAlive) < 2*int(appPongWait); pongs++ {
		app.await(t, "a pong during the outage", is("pong"))
	}
	srv = startGQLServer(t, node, port)
	x.untilExec(t, srv, "ticks")
	app.await(t, "a tick after the outage", opEvent("next", "ticks"))

	// The countdown ran once: a query run now goes after every replay.
	app.run(t, "q", "{ hello }")
	app.await(t, "the query's end", opEvent("complete", "q"))
	x.untilExec(t, srv, "hello")
	if want := (execs{"ticks": 3, "countdown": 1, "hello": 1}); fmt.Sprint(x) != fmt.Sprint(want) {
		t.Errorf("the servers ran %v, want %v", x, want)
	}
	if app.acks != 1 {
		t.Errorf("the app saw %d connection_ack, want 1", app.acks)
	}
}
