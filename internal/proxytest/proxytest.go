// Package proxytest runs a real HTTP forward proxy, Debian's tinyproxy, on
// loopback for the tests of tether's proxy support (TETHER_UPSTREAM_PROXY,
// HTTPS_PROXY): each Proxy has its own generated configuration, port, pid
// file and log in a temporary directory, optionally requires Basic
// credentials, lets CONNECT reach only the ports it is given, and is stopped
// by its own pid.
//
// tinyproxy is found on PATH (apt-get install tinyproxy; .ci/run installs
// it). Without it, Start skips the test and says so, unless the CI
// variable is set: then the test fails, since CI must not pass without
// having gone through a real proxy.
//
// Concurrency: a Proxy's methods are safe for concurrent use. The one
// goroutine per run of tinyproxy, which waits for the process, is owned by
// the Proxy and has ended when Stop returns (Start registers Stop with
// t.Cleanup).
package proxytest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options configures a Proxy.
type Options struct {
	// User and Password, when User is set, are the only credentials the
	// proxy accepts (tinyproxy's BasicAuth); others get 407.
	User, Password string
	// ConnectPorts are the ports CONNECT may tunnel to; tinyproxy refuses
	// the others with 403. At least one is required: tinyproxy allows every
	// port when none is listed, which is not what a corporate proxy does.
	ConnectPorts []int
}

// startWait bounds tinyproxy's start, on a machine that may be busy
// building race-instrumented test binaries.
const startWait = 15 * time.Second

// stopWait bounds the wait for tinyproxy to exit after SIGTERM, before
// SIGKILL.
const stopWait = 5 * time.Second

// Proxy is one tinyproxy.
type Proxy struct {
	bin  string
	dir  string
	opts Options
	port int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	waitErr error
}

// Start runs tinyproxy with opts on a free 127.0.0.1 port, stopped at the
// end of the test. It skips the test when tinyproxy is missing and CI is
// not set.
func Start(t testing.TB, opts Options) *Proxy {
	t.Helper()
	if len(opts.ConnectPorts) == 0 {
		t.Fatal("proxytest: no ConnectPorts")
	}
	bin, err := exec.LookPath("tinyproxy")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("tinyproxy is missing and CI is set: .ci/run must install it (apt-get install tinyproxy): %v", err)
		}
		t.Skipf("tinyproxy is missing (install: apt-get install tinyproxy; or run .ci/run): %v", err)
	}
	p := &Proxy{bin: bin, dir: t.TempDir(), opts: opts}
	t.Cleanup(p.Stop)
	var last error
	for range 3 { // a free port may be taken between its choice and tinyproxy's bind
		if p.port, err = freePort(); err != nil {
			t.Fatal(err)
		}
		if last = p.start(); last == nil {
			return p
		}
	}
	t.Fatalf("start tinyproxy: %v", last)
	return nil
}

// Restart starts the stopped proxy again on the same port (a proxy that
// was down comes back).
func (p *Proxy) Restart(t testing.TB) {
	t.Helper()
	if err := p.start(); err != nil {
		t.Fatalf("restart tinyproxy: %v", err)
	}
}

// Addr is the proxy's 127.0.0.1:port.
func (p *Proxy) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// URL is the proxy's http:// URL with its credentials, if it has some.
func (p *Proxy) URL() *url.URL {
	u := &url.URL{Scheme: "http", Host: p.Addr()}
	if p.opts.User != "" {
		u.User = url.UserPassword(p.opts.User, p.opts.Password)
	}
	return u
}

// URLWith is the proxy's URL with other credentials (none when user is "").
func (p *Proxy) URLWith(user, password string) *url.URL {
	u := &url.URL{Scheme: "http", Host: p.Addr()}
	if user != "" {
		u.User = url.UserPassword(user, password)
	}
	return u
}

// Requests returns the requests tinyproxy has logged so far, such as
// "CONNECT 127.0.0.1:4242 HTTP/1.1" or "GET http://127.0.0.1:4242/ HTTP/1.1".
func (p *Proxy) Requests() []string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "tinyproxy.log"))
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if _, req, ok := strings.Cut(line, "]: Request (file descriptor "); ok {
			if _, r, ok := strings.Cut(req, "): "); ok {
				out = append(out, r)
			}
		}
	}
	return out
}

// Log is tinyproxy's whole log, for a failing test's output.
func (p *Proxy) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "tinyproxy.log"))
	return string(b)
}

// Stop ends tinyproxy by its pid (SIGTERM, then SIGKILL after stopWait)
// and waits for it. It is idempotent; a stopped Proxy refuses connections.
func (p *Proxy) Stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopWait)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		_ = cmd.Process.Kill()
		<-exited
	}
}

// config is tinyproxy's configuration: loopback only, its own files.
func (p *Proxy) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Port %d\nListen 127.0.0.1\nTimeout 30\nMaxClients 64\n", p.port)
	fmt.Fprintf(&b, "LogFile %q\nPidFile %q\nLogLevel Info\n", filepath.Join(p.dir, "tinyproxy.log"), filepath.Join(p.dir, "tinyproxy.pid"))
	b.WriteString("Allow 127.0.0.1\nDisableViaHeader Yes\n")
	for _, port := range p.opts.ConnectPorts {
		fmt.Fprintf(&b, "ConnectPort %d\n", port)
	}
	if p.opts.User != "" {
		fmt.Fprintf(&b, "BasicAuth %s %s\n", p.opts.User, p.opts.Password)
	}
	return b.String()
}

// start runs tinyproxy in the foreground and waits until it accepts
// connections, or fails with its log when it exits first.
func (p *Proxy) start() error {
	conf := filepath.Join(p.dir, "tinyproxy.conf")
	if err := os.WriteFile(conf, []byte(p.config()), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(p.bin, "-d", "-c", conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	killWithParent(cmd.SysProcAttr)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	if err := p.awaitListening(exited); err != nil {
		p.Stop()
		return fmt.Errorf("%w\n%s\n%s", err, out.String(), p.Log())
	}
	return nil
}

// awaitListening polls the port until tinyproxy accepts a connection.
func (p *Proxy) awaitListening(exited <-chan struct{}) error {
	deadline := time.Now().Add(startWait)
	retry := time.NewTicker(10 * time.Millisecond)
	defer retry.Stop()
	for {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tinyproxy not listening on %s within %v: %w", p.Addr(), startWait, err)
		}
		select {
		case <-exited:
			p.mu.Lock()
			werr := p.waitErr
			p.mu.Unlock()
			return errors.Join(errors.New("tinyproxy exited at start"), werr)
		case <-retry.C:
		}
	}
}

// freePort returns a 127.0.0.1 port nothing listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
