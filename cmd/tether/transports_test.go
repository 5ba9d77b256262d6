package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// lineApp is a legacy app on a tcp:// listener: it writes lines and reads
// lines.
type lineApp struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialLineApp(t *testing.T, addr string) *lineApp {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatalf("line app dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &lineApp{conn: conn, r: bufio.NewReader(conn)}
}

func (a *lineApp) send(t *testing.T, line string) {
	t.Helper()
	_ = a.conn.SetWriteDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(a.conn, line+"\n"); err != nil {
		t.Fatalf("line app send %q: %v", line, err)
	}
}

// expect fails unless the next line, without its "\n", is want.
func (a *lineApp) expect(t *testing.T, want string) {
	t.Helper()
	_ = a.conn.SetReadDeadline(time.Now().Add(waitLimit))
	line, err := a.r.ReadString('\n')
	if err != nil || line != want+"\n" {
		t.Fatalf("line app read %q, %v; want %q", line, err, want+"\n")
	}
}

// expectEOF fails unless tether ends the stream with nothing more to read;
// then the app closes its side, as a polite app does on end of stream.
func (a *lineApp) expectEOF(t *testing.T) {
	t.Helper()
	_ = a.conn.SetReadDeadline(time.Now().Add(waitLimit))
	rest, err := io.ReadAll(a.r)
	if err != nil || len(rest) != 0 {
		t.Fatalf("line app: read %q, %v; want end of stream", rest, err)
	}
	_ = a.conn.Close()
}

// unixDialer leads a WebSocket dial to the unix socket at path, whatever
// the URL's host.
func unixDialer(path string) ws.Dialer {
	return ws.Dialer{NetDial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
}

// listeningAddrs maps each listener kind to the address its "listening" log
// line announced.
func listeningAddrs(t *testing.T, r *running) map[proxy.ListenerKind]string {
	t.Helper()
	out := map[proxy.ListenerKind]string{}
	for _, e := range r.logs.FilterMessage("listening").All() {
		m := e.ContextMap()
		kind, _ := m["kind"].(string)
		addr, _ := m["addr"].(string)
		out[proxy.ListenerKind(kind)] = addr
	}
	return out
}

// One tether, three listeners: a WebSocket app, a line app and a WebSocket
// app on a unix socket each get their own upstream connection with the same
// upstream configuration, and the drain closes all three and removes the
// socket file.
func TestListenersShareUpstream(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "s.sock")
	up := newTestUpstream(t, upstreamtest.Options{})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":     up.URL(),
		"TETHER_LISTEN":           "127.0.0.1:0,tcp://127.0.0.1:0,unix://" + sock,
		"TETHER_UNIX_SOCKET_MODE": "0660",
	})
	addrs := listeningAddrs(t, r)
	if len(addrs) != 3 || addrs[proxy.ListenerUnix] != sock || r.appURL != "ws://"+addrs[proxy.ListenerWS]+"/" {
		t.Fatalf("listening lines announce %v (app URL %s), want ws, tcp and unix at %s", addrs, r.appURL, sock)
	}
	checkMode(t, sock, 0o660)

	wsApp := dialTestApp(t, r.appURL)
	lineApp := dialLineApp(t, addrs[proxy.ListenerTCP])
	unixApp := dialTestAppWith(t, unixDialer(sock), "ws://localhost/")
	wsApp.send(t, "via ws")
	lineApp.send(t, "via tcp")
	unixApp.send(t, "via unix")
	wsApp.expect(t, "via ws")
	lineApp.expect(t, "via tcp")
	unixApp.expect(t, "via unix")
	if n := up.Handshakes(); n != 3 {
		t.Errorf("upstream saw %d handshakes, want one per app (3)", n)
	}

	if _, err := r.stop(t); err != nil {
		t.Errorf("serveProxy after the drain = %v, want nil", err)
	}
	wsApp.expectClose(t, 1001)
	unixApp.expectClose(t, 1001)
	lineApp.expectEOF(t)
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file after the drain: %v, want it removed", err)
	}
}

// A stale socket file from a previous run does not stop tether.
func TestStaleSocketAtStart(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "s.sock")
	staleSocket(t, sock)
	up := newTestUpstream(t, upstreamtest.Options{})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL": up.URL(),
		"TETHER_LISTEN":       "unix://" + sock,
	})
	r.awaitLog(t, "removed stale unix socket")
	checkMode(t, sock, 0o600)
	app := dialTestAppWith(t, unixDialer(sock), "ws://localhost/")
	app.send(t, "hello")
	app.expect(t, "hello")
}

// A listener that cannot be opened stops tether with an error naming its
// entry, exit code 1, and leaves nothing behind.
func TestListenerFailureAtStart(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "s.sock")
	live := filepath.Join(dir, "live.sock")
	other, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	env := map[string]string{
		"TETHER_UPSTREAM_URL": "ws://127.0.0.1:1/",
		"TETHER_LISTEN":       "unix://" + sock + ",tcp://127.0.0.1:0,unix://" + live,
		"TETHER_ADMIN_LISTEN": "off",
		"TETHER_LOG_LEVEL":    "error",
	}
	err = run(context.Background(), nil, env, io.Discard, io.Discard)
	want := `listen on TETHER_LISTEN entry 3 "unix://` + live + `": ` + live + ": another process is listening on the socket"
	if err == nil || err.Error() != want {
		t.Fatalf("run = %v, want %q", err, want)
	}
	if code := exitCode(err, io.Discard); code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket of entry 1 after the failure: %v, want it removed", err)
	}
}

// Every non-loopback entry gets its own warning; unix sockets never do.
func TestNonLoopbackWarnings(t *testing.T) {
	needUnixSockets(t)
	cfg, err := config.Load(configtest.WithURL(map[string]string{
		"TETHER_LISTEN":     "127.0.0.1:8080,0.0.0.0:8081,tcp://10.0.0.5:7000,tcp://[::1]:7001,unix:///run/t.sock",
		"TETHER_TCP_BINARY": "drop",
	}))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := observedLogger()
	warnSettings(cfg, log)
	var warned []string
	for _, e := range logs.FilterMessage("TETHER_LISTEN is not a loopback address: any host that reaches it can use the upstream credentials").All() {
		warned = append(warned, e.ContextMap()["listen"].(string))
	}
	if strings.Join(warned, ",") != "ws://0.0.0.0:8081,tcp://10.0.0.5:7000" {
		t.Errorf("warned about %q, want the two non-loopback entries", warned)
	}
	if n := logs.FilterMessage("setting has no effect with the configured listeners").Len(); n != 0 {
		t.Errorf("%d ineffective-setting warnings with a tcp:// listener, want 0", n)
	}
	cfg.Listen = cfg.Listen[:1]
	logs.TakeAll()
	warnSettings(cfg, log)
	if e := logs.FilterMessage("setting has no effect with the configured listeners").All(); len(e) != 1 || e[0].ContextMap()["variable"] != "TETHER_TCP_BINARY" {
		t.Errorf("warnings %v, want one naming TETHER_TCP_BINARY", logs.All())
	}
}

// startedListeners reads tether's JSON log until "tether started" and
// returns the address of each "listening" line by kind.
func startedListeners(t *testing.T, logs *bufio.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	for {
		line, err := logs.ReadBytes('\n')
		if err != nil {
			t.Fatalf("tether exited before it started listening: %v", err)
		}
		var entry struct {
			Msg  string `json:"msg"`
			Kind string `json:"kind"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &entry) != nil {
			continue
		}
		switch entry.Msg {
		case "listening":
			out[entry.Kind] = entry.Addr
		case "tether started":
			return out
		}
	}
}

// TestSIGTERMDrainsEveryListener runs the real binary with three listeners:
// on SIGTERM the WebSocket apps get 1001, the line app's connection ends,
// the socket file is removed and tether exits 0.
func TestSIGTERMDrainsEveryListener(t *testing.T) {
	bin := buildTether(t)
	sock := filepath.Join(shortTempDir(t), "s.sock")
	up := newTestUpstream(t, upstreamtest.Options{})
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"TETHER_UPSTREAM_URL=" + up.URL(),
		"TETHER_LISTEN=127.0.0.1:0,tcp://127.0.0.1:0,unix://" + sock,
		"TETHER_ADMIN_LISTEN=off",
		"TETHER_DRAIN_TIMEOUT=1s",
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := bufio.NewReader(stderr)
	addrs := startedListeners(t, logs)
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, logs); close(copied) }() // ends at exit
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // no-op once it exited
		<-copied
	})
	if addrs["unix"] != sock || addrs["ws"] == "" || addrs["tcp"] == "" {
		t.Fatalf("listening lines announce %v, want ws, tcp and unix at %s", addrs, sock)
	}

	wsApp := dialTestApp(t, "ws://"+addrs["ws"]+"/")
	lineApp := dialLineApp(t, addrs["tcp"])
	unixApp := dialTestAppWith(t, unixDialer(sock), "ws://localhost/")
	for _, a := range []*testApp{wsApp, unixApp} {
		a.send(t, "ping")
		a.expect(t, "ping")
	}
	lineApp.send(t, "ping")
	lineApp.expect(t, "ping")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wsApp.expectClose(t, 1001)
	unixApp.expectClose(t, 1001)
	lineApp.expectEOF(t)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tether exit after SIGTERM: %v, want exit 0", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file after exit: %v, want it removed", err)
	}
}

// TETHER_TCP_BINARY and TETHER_TCP_NEWLINE reach the line apps: a binary
// message and a text message holding a line break become lines by default,
// and are dropped when the variables say drop.
func TestTCPPoliciesApplied(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"defaults", map[string]string{}, []string{"AAEK", "a b  c", "last"}},
		{"drop", map[string]string{"TETHER_TCP_BINARY": "drop", "TETHER_TCP_NEWLINE": "drop"}, []string{"last"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newTestUpstream(t, upstreamtest.Options{OnConn: func(c *upstreamtest.Conn) {
				_ = c.SendBinary([]byte{0, 1, '\n'})
				_ = c.Send("a\nb\r\nc")
				_ = c.Send("last")
				<-c.Done()
			}})
			env := map[string]string{"TETHER_UPSTREAM_URL": up.URL(), "TETHER_LISTEN": "tcp://127.0.0.1:0"}
			for k, v := range tt.env {
				env[k] = v
			}
			r := startProxy(t, env)
			app := dialLineApp(t, listeningAddrs(t, r)[proxy.ListenerTCP])
			for _, line := range tt.want {
				app.expect(t, line)
			}
			_ = app.conn.Close()
		})
	}
}

// TETHER_FORWARD_PATH reaches both WebSocket listeners: the app's path and
// query are joined onto the upstream URL; a line app, which has no path,
// and every app without the variable get the upstream URL as written.
func TestForwardPathApplied(t *testing.T) {
	tests := []struct {
		forward                    string
		wantWS, wantUnix, wantLine string
	}{
		{"true", "/v1/prices?k=1&symbol=X", "/v1/orders?k=1", "/v1?k=1"},
		{"false", "/v1?k=1", "/v1?k=1", "/v1?k=1"},
	}
	for _, tt := range tests {
		t.Run("TETHER_FORWARD_PATH="+tt.forward, func(t *testing.T) {
			sock := filepath.Join(shortTempDir(t), "s.sock")
			up := newTestUpstream(t, upstreamtest.Options{})
			r := startProxy(t, map[string]string{
				"TETHER_UPSTREAM_URL": up.URL() + "v1?k=1",
				"TETHER_LISTEN":       "127.0.0.1:0,unix://" + sock + ",tcp://127.0.0.1:0",
				"TETHER_FORWARD_PATH": tt.forward,
			})
			dialTestApp(t, r.appURL+"prices?symbol=X")
			checkUpstreamPath(t, up, "ws app", tt.wantWS)
			dialTestAppWith(t, unixDialer(sock), "ws://localhost/orders")
			checkUpstreamPath(t, up, "unix app", tt.wantUnix)
			dialLineApp(t, listeningAddrs(t, r)[proxy.ListenerTCP])
			checkUpstreamPath(t, up, "line app", tt.wantLine)
		})
	}
}

// checkUpstreamPath fails unless the upstream's next connection asked for
// want (path and query).
func checkUpstreamPath(t *testing.T, up *upstreamtest.Server, who, want string) {
	t.Helper()
	select {
	case c := <-up.Conns():
		if c.Path() != want {
			t.Errorf("%s: upstream request target %q, want %q", who, c.Path(), want)
		}
	case <-time.After(waitLimit):
		t.Fatalf("%s: no upstream connection within %v", who, waitLimit)
	}
}
