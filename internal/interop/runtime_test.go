package interop

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// runtime is one WebSocket implementation with its two scripts.
type runtime struct {
	name   string   // "node v20.20.2 ws 8.23.0", for messages and the log
	argv   []string // the interpreter, before the script
	env    []string
	server string // script in testdata/
	client string
}

// How .ci/run installs each peer; printed when one is missing.
const (
	nodeInstall   = "npm install --no-audit --no-fund --no-save --prefix internal/interop/testdata ws@8"
	pythonInstall = "apt-get install -y python3-websockets"
)

var (
	nodeOnce   = sync.OnceValues(findNode)
	pythonOnce = sync.OnceValues(findPython)
)

// nodeWS returns Node.js with the ws package, or ends the test (see need).
func nodeWS(t *testing.T) runtime {
	t.Helper()
	rt, err := nodeOnce()
	need(t, "Node.js with the ws package", nodeInstall, err)
	t.Logf("peer: %s", rt.name)
	return rt
}

// pythonWebsockets returns Python with the websockets library, or ends the
// test (see need).
func pythonWebsockets(t *testing.T) runtime {
	t.Helper()
	rt, err := pythonOnce()
	need(t, "Python with the websockets library", pythonInstall, err)
	t.Logf("peer: %s (%s)", rt.name, rt.argv[0])
	return rt
}

// need fails the test under CI and skips it elsewhere when a peer is missing:
// a developer without Node can still run the suite, but CI must not pass
// without having talked to every peer.
func need(t *testing.T, what, install string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing and CI is set: .ci/run must install it (%s): %v", what, install, err)
	}
	reason := fmt.Sprintf("%s is missing (install: %s; or run .ci/run)", what, install)
	skipped.Add(reason)
	t.Skipf("%s: %v", reason, err)
}

// findNode finds node and the ws package in testdata/node_modules, where
// node's own module resolution finds it from the scripts beside it.
func findNode() (runtime, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return runtime{}, err
	}
	cmd := exec.Command(node, "-e", `process.stdout.write(process.version + " " + require("ws/package.json").version)`)
	cmd.Dir = "testdata" // require from -e resolves from the working directory
	out, err := cmd.Output()
	if err != nil {
		return runtime{}, fmt.Errorf("ws is not in testdata/node_modules: %w", err)
	}
	nodeVersion, wsVersion, _ := strings.Cut(string(out), " ")
	if !strings.HasPrefix(wsVersion, "8.") {
		return runtime{}, fmt.Errorf("ws %s in testdata/node_modules, want 8.x", wsVersion)
	}
	return runtime{
		name:   "node " + nodeVersion + " ws " + wsVersion,
		argv:   []string{node},
		env:    os.Environ(),
		server: "node_server.js",
		client: "node_client.js",
	}, nil
}

// findPython takes the first interpreter that imports websockets: Debian's
// package installs it for /usr/bin/python3, which need not be the python3 on
// PATH (pyenv, a virtualenv).
func findPython() (runtime, error) {
	candidates := []string{os.Getenv("TETHER_INTEROP_PYTHON"), "python3", "/usr/bin/python3"}
	var errs []error
	for _, c := range candidates {
		if c == "" {
			continue
		}
		path, err := exec.LookPath(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out, err := exec.Command(path, "-c",
			"import platform, websockets; print(platform.python_version(), websockets.__version__, end='')").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s cannot import websockets: %w", path, err))
			continue
		}
		pyVersion, wsVersion, _ := strings.Cut(string(out), " ")
		return runtime{
			name:   "python " + pyVersion + " websockets " + wsVersion,
			argv:   []string{path, "-u"},
			env:    os.Environ(),
			server: "py_server.py",
			client: "py_client.py",
		}, nil
	}
	return runtime{}, errors.Join(errs...)
}

// command builds the command line of one of the runtime's scripts.
func (rt runtime) command(script string, args ...string) *exec.Cmd {
	argv := append(append(append([]string(nil), rt.argv...), filepath.Join("testdata", script)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = rt.env
	return cmd
}

// server is a running server script and the port it listens on.
type server struct {
	peer
	port int
}

// startServer starts rt's server on port (0: any free port), with the
// script's extra flags (node_server.js: --deflate), and waits until it
// listens.
func startServer(t *testing.T, rt runtime, port int, extra ...string) server {
	t.Helper()
	name := rt.name + " server"
	args := append([]string{"--port", strconv.Itoa(port)}, extra...)
	p := peer{startProc(t, name, rt.command(rt.server, args...), false)}
	ev := p.await(t, startWait, "listening", is("listening"))
	if port != 0 && ev.Port != port {
		t.Fatalf("%s listens on %d, want %d", name, ev.Port, port)
	}
	return server{peer: p, port: ev.Port}
}

// url is the address tether dials.
func (s server) url() string {
	return fmt.Sprintf("ws://127.0.0.1:%d/feed", s.port)
}

// client is a connected client script and what its open event said.
type client struct {
	peer
	open event
}

// dialOptions are how an app connects.
type dialOptions struct {
	protocols []string
	origin    string
}

// startClient starts rt's client against url and waits for its socket to open.
func startClient(t *testing.T, rt runtime, url string, o dialOptions) client {
	t.Helper()
	p := peer{startProc(t, rt.name+" client", rt.command(rt.client, o.args(url)...), false)}
	return client{peer: p, open: p.await(t, startWait, "open", is("open"))}
}

// args are the client script's arguments.
func (o dialOptions) args(url string) []string {
	args := []string{"--url", url}
	if len(o.protocols) > 0 {
		args = append(args, "--protocols", strings.Join(o.protocols, ","))
	}
	if o.origin != "" {
		args = append(args, "--origin", o.origin)
	}
	return args
}

// startRefusedClient starts rt's client against url and returns the error
// event it reports when its handshake is refused; an open socket fails the
// test.
func startRefusedClient(t *testing.T, rt runtime, url string, o dialOptions) event {
	t.Helper()
	p := peer{startProc(t, rt.name+" client", rt.command(rt.client, o.args(url)...), false)}
	ev := p.next(t, startWait, "the refusal")
	if ev.Event != "error" {
		t.Fatalf("%s: %s, want its handshake refused (an error event)", p.name, ev)
	}
	return ev
}
