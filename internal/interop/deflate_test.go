package interop

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
)

// The permessage-deflate tests (RFC 7692) put tether, which offers the
// extension to its upstream by default (TETHER_UPSTREAM_COMPRESSION=auto),
// in front of servers that compress: Node's ws with perMessageDeflate
// (context takeover, every message compressed) and Python's websockets,
// whose default accepts with 12-bit windows both ways, so tether, whose
// compressor always uses 15 bits, must send it uncompressed messages.

// farApart is text whose repeats lie 6000 bytes apart: compressed with a
// 32 KiB window it refers back further than a 12-bit (4 KiB) window
// reaches, so a peer that limited tether's window fails on it if tether
// ignored the limit.
func farApart(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4500)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	x := base64.StdEncoding.EncodeToString(b) // 6000 characters
	return `{"blob":"` + x + x + `"}`
}

// compressedBasics: the negotiated extension, echoes both ways (a large
// compressible text, a 1 MiB random binary message, an empty one), and a
// burst or feed from the upstream in order.
func compressedBasics(t *testing.T, app client, up server, wantAccepted string) {
	t.Helper()
	conn := up.await(t, messageWait, "tether's upstream connection", is("connection"))
	if conn.Extensions != "permessage-deflate" {
		t.Fatalf("upstream negotiated extensions %q with tether (offered %q), want permessage-deflate", conn.Extensions, conn.Offered)
	}
	if conn.Offered != "permessage-deflate;client_no_context_takeover;client_max_window_bits" {
		t.Errorf("tether offered %q", conn.Offered)
	}
	if wantAccepted != "" && conn.Accepted != wantAccepted {
		t.Errorf("upstream answered %q, want %q", conn.Accepted, wantAccepted)
	}
	echoText(t, app, farApart(t))
	echoText(t, app, strings.Repeat(`{"op":"subscribe","channel":"prices"}`, 200))
	echoText(t, app, "")
	echoBinary(t, app, bigMessage)
	echoText(t, app, "after the large ones")
}

// TestDeflateNodeUpstream: a Node ws upstream with perMessageDeflate.
func TestDeflateNodeUpstream(t *testing.T) {
	rt := nodeWS(t)
	up := startServer(t, rt, 0, "--deflate")
	tt := startTether(t, up.url())
	app := startClient(t, rt, tt.url(), dialOptions{})
	compressedBasics(t, app, up, "")
	const n = 2000
	up.send(t, map[string]any{"cmd": "burst", "count": n})
	readTrades(t, app, n)
}

// TestDeflatePythonUpstream: a Python websockets upstream with its default
// compression.
func TestDeflatePythonUpstream(t *testing.T) {
	rt := pythonWebsockets(t)
	up := startServer(t, rt, 0)
	tt := startTether(t, up.url())
	app := startClient(t, nodeOrPython(t), tt.url(), dialOptions{})
	compressedBasics(t, app, up, "permessage-deflate; client_no_context_takeover; server_max_window_bits=12; client_max_window_bits=12")
	up.send(t, map[string]any{"cmd": "feed", "from": 1, "every_ms": feedEvery})
	readFeed(t, app, 1, feedBefore)
}

// nodeOrPython is an app runtime: Node when present, else Python.
func nodeOrPython(t *testing.T) runtime {
	t.Helper()
	if rt, err := nodeOnce(); err == nil {
		return rt
	}
	return pythonWebsockets(t)
}

// readTrades expects the burst's n trades, numbered from 1, in order.
func readTrades(t *testing.T, app client, n int) {
	t.Helper()
	for want := 1; want <= n; want++ {
		if got := feedSeq(t, app.next(t, messageWait, "trade")); got != want {
			t.Fatalf("trade %d arrived where %d was due", got, want)
		}
	}
}

// TestDeflateWireBytes measures what the extension saves on the upstream
// wire: the bytes a Node ws server writes for a burst of JSON trades to
// tether, with TETHER_UPSTREAM_COMPRESSION=auto and =off, read from its
// socket. Compressed must be less than half (ws compresses such a feed to
// some 20-30 %); the figures are logged for the README.
func TestDeflateWireBytes(t *testing.T) {
	rt := nodeWS(t)
	const n = 5000
	wire := map[string]int64{}
	for _, mode := range []string{"auto", "off"} {
		up := startServer(t, rt, 0, "--deflate")
		tt := startTether(t, up.url(), "TETHER_UPSTREAM_COMPRESSION="+mode)
		app := startClient(t, rt, tt.url(), dialOptions{})
		conn := up.await(t, messageWait, "tether's upstream connection", is("connection"))
		if compressed := conn.Extensions == "permessage-deflate"; compressed != (mode == "auto") {
			t.Fatalf("mode %s: negotiated %q", mode, conn.Extensions)
		}
		before := stats(t, up)
		up.send(t, map[string]any{"cmd": "burst", "count": n})
		// The trades are read as they come, each within messageWait of the
		// one before, and only then is the burst's end awaited: the burst as
		// a whole has no bound (ws compresses message after message on
		// libuv's thread pool, which took 4 to 12 s on a loaded 2-core
		// machine with or without tether in between), and an app whose
		// lines the test left unread would stop at lineBuffer of them.
		readTrades(t, app, n)
		up.await(t, messageWait, "burst written", is("burst_done"))
		wire[mode] = stats(t, up).Written - before.Written
		up.kill()
	}
	t.Logf("upstream wire bytes for %d JSON trades (~120 B each): compressed %d (%.1f B/msg), plain %d (%.1f B/msg), %.0f %%",
		n, wire["auto"], float64(wire["auto"])/n, wire["off"], float64(wire["off"])/n, 100*float64(wire["auto"])/float64(wire["off"]))
	if wire["auto"]*2 >= wire["off"] {
		t.Errorf("compressed feed took %d bytes on the wire, plain %d: want less than half", wire["auto"], wire["off"])
	}
}

func stats(t *testing.T, up server) event {
	t.Helper()
	up.send(t, map[string]any{"cmd": "stats"})
	return up.await(t, messageWait, "stats", is("stats"))
}
