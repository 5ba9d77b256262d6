package interop

import (
	"encoding/json"
	"strings"
	"testing"
)

// The app offers two subprotocols; the servers in testdata/ accept only the
// second, so the app sees "v1.feed" only if tether offered the upstream the
// app's whole list and passed the upstream's choice back.
var feedProtocols = []string{"v2.feed", "v1.feed"}

const (
	// feedEvery is the servers' push interval: fast enough that the kill
	// lands mid-stream, slow enough not to flood the test's line buffer.
	feedEvery = 10
	// feedBefore and feedAfter are how many feed messages are checked before
	// the kill and after the restart.
	feedBefore = 20
	feedAfter  = 20
	// restartFrom numbers the restarted server's feed, so that a message
	// of the killed server's cannot pass for one of it.
	restartFrom = 1001
	// bigMessage is the "1 MiB arrives whole" case.
	bigMessage = 1 << 20
)

// TestNodeWS: Node ws app → tether → Node ws upstream.
func TestNodeWS(t *testing.T) {
	t.Parallel()
	node := nodeWS(t)
	survives(t, node, node)
}

// TestPythonWebsockets: Python websockets app → tether → Python websockets
// upstream.
func TestPythonWebsockets(t *testing.T) {
	t.Parallel()
	python := pythonWebsockets(t)
	survives(t, python, python)
}

// TestCross puts each implementation on the other's side of tether.
func TestCross(t *testing.T) {
	t.Parallel()
	node, python := nodeWS(t), pythonWebsockets(t)
	for _, tc := range []struct {
		name          string
		app, upstream runtime
	}{
		{"python app, node upstream", python, node},
		{"node app, python upstream", node, python},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			app, up, _ := basics(t, tc.app, tc.upstream)
			leaves(t, app, up)
		})
	}
}

// TestBrowserOrigin: a browser sends an Origin header on every WebSocket
// handshake. A Node ws app that does the same, as a page's script would, is
// accepted and served like any other app when its origin is listed in
// TETHER_ALLOWED_ORIGINS. A page on another origin, localhost included, is
// refused with 403 before tether dials the upstream: the refused app offers a
// subprotocol, so an upstream connection made for it would show in the
// upstream's first connection event.
func TestBrowserOrigin(t *testing.T) {
	t.Parallel()
	node := nodeWS(t)
	up := startServer(t, node, 0)
	tt := startTether(t, up.url(), "TETHER_ALLOWED_ORIGINS=http://localhost:3000")

	foreign := startRefusedClient(t, node, tt.url(), dialOptions{origin: "http://localhost:8000", protocols: feedProtocols})
	if !strings.Contains(foreign.Message, "403") {
		t.Errorf("app on a foreign origin saw %s, want an HTTP 403 refusal", foreign)
	}

	app := startClient(t, node, tt.url(), dialOptions{origin: "http://localhost:3000"})
	conn := up.await(t, messageWait, "tether's upstream connection", is("connection"))
	if conn.Protocol != "" {
		t.Errorf("upstream's first connection negotiated %q: it was made for the refused app", conn.Protocol)
	}
	echoText(t, app, "from a page on http://localhost:3000")
	leaves(t, app, up)
}

// basics: the handshake carries the upstream's subprotocol back to the app,
// text and binary messages echo with their type (empty ones too), a 1 MiB
// message arrives whole, fragmented messages arrive whole both ways, and
// tether answers pings from both sides with their payload. It returns the running pieces for scenarios that go on.
func basics(t *testing.T, appRT, upRT runtime) (client, server, tether) {
	t.Helper()
	up := startServer(t, upRT, 0)
	tt := startTether(t, up.url())
	app := startClient(t, appRT, tt.url(), dialOptions{protocols: feedProtocols})
	conn := up.await(t, messageWait, "tether's upstream connection", is("connection"))
	if conn.Protocol != "v1.feed" {
		t.Errorf("upstream negotiated subprotocol %q with tether, want v1.feed", conn.Protocol)
	}
	if app.open.Protocol != "v1.feed" {
		t.Errorf("app sees subprotocol %q, want the upstream's choice v1.feed", app.open.Protocol)
	}
	echoText(t, app, "héllo, tether ☃")
	echoText(t, app, "")
	echoBinary(t, app, bigMessage)
	echoBinary(t, app, 0)
	fragmented(t, app, up)
	pingPong(t, app.peer, "tether?")
	pingPong(t, up.peer, "upstream?")
	return app, up, tt
}

// leaves: the app closes with 1000; the closing handshake completes (the app
// sees 1000, not 1006) and tether closes its upstream connection with 1000.
func leaves(t *testing.T, app client, up server) {
	t.Helper()
	app.send(t, map[string]any{"cmd": "close", "code": 1000, "reason": "done"})
	if ev := app.await(t, messageWait, "close", is("close")); ev.Code != 1000 {
		t.Errorf("app's closing handshake ended with %s, want code 1000", ev)
	}
	if ev := up.await(t, messageWait, "close", is("close")); ev.Code != 1000 {
		t.Errorf("upstream saw %s when the app left, want close 1000", ev)
	}
}

// survives runs basics, then the scenario tether exists for: the upstream
// process is SIGKILLed mid-feed and restarted on the same port; the app's
// socket never closes, a message the app sent while the upstream was away
// reaches the new upstream, and the feed resumes on the same socket. Last, an
// upstream close 1008 "bad" reaches the app with that code and reason.
func survives(t *testing.T, appRT, upRT runtime) {
	app, up, tt := basics(t, appRT, upRT)

	up.send(t, map[string]any{"cmd": "feed", "from": 1, "every_ms": feedEvery})
	last := readFeed(t, app, 1, feedBefore)
	up.kill()
	// Only once tether has seen the loss is a message sure to be queued
	// rather than written to the dead connection (README: what is and is
	// not guaranteed).
	awaitLog(t, tt.log, messageWait, "upstream reconnect scheduled")
	const queued = "sent while the upstream was away"
	app.send(t, map[string]any{"cmd": "send", "text": queued})

	up = startServer(t, upRT, up.port)
	conn := up.await(t, reconnectWait, "tether's reconnection", is("connection"))
	if conn.Protocol != "v1.feed" {
		t.Errorf("after the restart, upstream negotiated subprotocol %q with tether, want v1.feed", conn.Protocol)
	}
	if ev := up.await(t, messageWait, "the queued message", is("message")); ev.Data != queued {
		t.Errorf("restarted upstream first got %s, want the queued %q", ev, queued)
	}
	// Messages the killed server had sent after the last one read may
	// still arrive, in order, before the queued message's echo.
	skipFeed(t, app, last+1, queued)
	up.send(t, map[string]any{"cmd": "feed", "from": restartFrom, "every_ms": feedEvery})
	readFeed(t, app, restartFrom, feedAfter)

	up.send(t, map[string]any{"cmd": "close", "code": 1008, "reason": "bad"})
	closed := app.await(t, messageWait, "close 1008", is("close"))
	if closed.Code != 1008 || closed.Reason != "bad" {
		t.Errorf("app closed with %d %q, want the upstream's 1008 \"bad\"", closed.Code, closed.Reason)
	}
}

// echoText sends a text message and expects it back as text.
func echoText(t *testing.T, app client, text string) {
	t.Helper()
	app.send(t, map[string]any{"cmd": "send", "text": text})
	ev := app.await(t, messageWait, "text echo", is("message"))
	if ev.Type != "text" || ev.Data != text {
		t.Fatalf("echo of text %q arrived as %s", text, ev)
	}
}

// echoBinary sends size random bytes and expects the same bytes back, whole
// and still binary.
func echoBinary(t *testing.T, app client, size int) {
	t.Helper()
	app.send(t, map[string]any{"cmd": "send_binary", "size": size})
	sent := app.await(t, messageWait, "sent", is("sent"))
	ev := app.await(t, messageWait, "binary echo", is("message"))
	if ev.Type != "binary" || ev.Size != size || ev.SHA256 != sent.SHA256 {
		t.Fatalf("echo of %d binary bytes (sha256 %s) arrived as %s", size, sent.SHA256, ev)
	}
}

// readFeed expects count feed messages numbered from first on, consecutively,
// and returns the last number.
func readFeed(t *testing.T, app client, first, count int) int {
	t.Helper()
	for want := first; want < first+count; want++ {
		if got := feedSeq(t, app.next(t, reconnectWait, "feed message")); got != want {
			t.Fatalf("feed message %d arrived where %d was due", got, want)
		}
	}
	return first + count - 1
}

// skipFeed reads the killed server's remaining feed messages (from next on,
// in order) until the echo of text.
func skipFeed(t *testing.T, app client, next int, text string) {
	t.Helper()
	for {
		ev := app.next(t, reconnectWait, "the echo of "+text)
		if ev.Event == "message" && ev.Type == "text" && ev.Data == text {
			return
		}
		if got := feedSeq(t, ev); got != next {
			t.Fatalf("feed message %d arrived where %d or the echo of %q was due", got, next, text)
		}
		next++
	}
}

// feedSeq returns the number of a feed message. Any other event here, a
// close in particular (the app's socket dropping, which tether exists to
// prevent), fails the test.
func feedSeq(t *testing.T, ev event) int {
	t.Helper()
	var msg struct {
		Seq *int `json:"seq"`
	}
	if ev.Event != "message" || ev.Type != "text" || json.Unmarshal([]byte(ev.Data), &msg) != nil || msg.Seq == nil {
		t.Fatalf("app got %s where a feed message was due", ev)
	}
	return *msg.Seq
}

// fragmented: a text message sent in several frames (RFC 6455 §5.4), by the
// app and by the upstream, reaches the other side as that one message.
func fragmented(t *testing.T, app client, up server) {
	t.Helper()
	parts := []string{"frag", "mént", "ed ☃"}
	const whole = "fragménted ☃"
	app.send(t, map[string]any{"cmd": "send_fragments", "parts": parts})
	up.await(t, messageWait, "the app's fragmented message, whole", func(e event) bool {
		return e.Event == "message" && e.Type == "text" && e.Data == whole
	})
	if ev := app.await(t, messageWait, "echo", is("message")); ev.Type != "text" || ev.Data != whole {
		t.Fatalf("echo of the fragmented %q arrived as %s", whole, ev)
	}
	up.send(t, map[string]any{"cmd": "send_fragments", "parts": parts})
	if ev := app.await(t, messageWait, "the upstream's fragmented message", is("message")); ev.Type != "text" || ev.Data != whole {
		t.Fatalf("the upstream's fragmented %q arrived as %s", whole, ev)
	}
}

// pingPong sends a ping from p and expects tether's pong with its payload
// (RFC 6455 §5.5.3).
func pingPong(t *testing.T, p peer, payload string) {
	t.Helper()
	p.send(t, map[string]any{"cmd": "ping"})
	if ev := p.await(t, messageWait, "pong", is("pong")); ev.Data != payload {
		t.Errorf("%s got pong %q, want the ping's payload %q", p.name, ev.Data, payload)
	}
}
