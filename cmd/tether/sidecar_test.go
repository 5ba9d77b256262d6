package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// builtTether is the binary the tests run: built on first use, shared by
// every test of the run, removed by TestMain. go build links anew on every
// call, even with everything cached: once per test that was 10-13 s each
// for five tests on a loaded machine.
var builtTether struct {
	once     sync.Once
	dir, bin string
	out      []byte
	err      error
}

// buildTether compiles the command once per test binary run.
func buildTether(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	b := &builtTether
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "tether-test-bin-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "tether")
		b.out, b.err = exec.Command("go", "build", "-o", b.bin, ".").CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build: %v\n%s", b.err, b.out)
	}
	return b.bin
}

// removeBuiltTether deletes the binary's directory, once no test runs.
func removeBuiltTether() {
	if builtTether.dir != "" {
		_ = os.RemoveAll(builtTether.dir)
	}
}

// startedAddr reads tether's JSON log until the "tether started" line and
// returns the app listener's address.
func startedAddr(t *testing.T, logs *bufio.Reader) string {
	t.Helper()
	for {
		line, err := logs.ReadBytes('\n')
		if err != nil {
			t.Fatalf("tether exited before it started listening: %v", err)
		}
		var entry struct {
			Msg    string `json:"msg"`
			Listen string `json:"listen"`
		}
		if json.Unmarshal(line, &entry) == nil && entry.Msg == "tether started" {
			return entry.Listen
		}
	}
}

// TestSIGTERMDrains runs the real binary: on SIGTERM the app gets close 1001,
// the upstream gets close 1000, and the process exits 0.
func TestSIGTERMDrains(t *testing.T) {
	bin := buildTether(t)
	up, err := upstreamtest.NewServer(upstreamtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })

	cmd := exec.Command(bin)
	cmd.Env = []string{
		"TETHER_UPSTREAM_URL=" + up.URL(),
		"TETHER_LISTEN=127.0.0.1:0",
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
	addr := startedAddr(t, logs)
	go func() { _, _ = io.Copy(io.Discard, logs) }() // keep the pipe drained; ends at exit

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	app, _, _, err := ws.Dialer{}.Dial(ctx, "ws://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if err := wsutil.WriteClientText(app, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = app.SetReadDeadline(time.Now().Add(5 * time.Second))
	echo, err := wsutil.ReadServerText(app)
	if err != nil || string(echo) != "hello" {
		t.Fatalf("echo through tether = %q, %v", echo, err)
	}
	upConn := <-up.Conns()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, err = wsutil.ReadServerText(app)
	var closed wsutil.ClosedError
	if !errors.As(err, &closed) || closed.Code != ws.StatusGoingAway {
		t.Fatalf("app read after SIGTERM = %v, want close 1001", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tether exit after SIGTERM: %v, want exit 0", err)
	}
	select {
	case <-upConn.Done():
	case <-ctx.Done():
		t.Fatal("upstream connection still open after tether exited")
	}
	if code, _, ok := upConn.ReceivedClose(); !ok || code != 1000 {
		t.Fatalf("upstream received close %d (ok=%v), want 1000", code, ok)
	}
}

// TestBadConfigExit2 runs the real binary with several invalid variables: one
// message names each, exit code 2, no stack trace.
func TestBadConfigExit2(t *testing.T) {
	bin := buildTether(t)
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"TETHER_UPSTREAM_URL=ftp://example.invalid/",
		"TETHER_DIAL_TIMEOUT=ten seconds",
		"TETHER_BACKOFF_JITTER=sometimes",
		"TETHER_UPSTREM_HEADERS=x",
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit = %v, want exit code 2; stderr:\n%s", err, stderr.String())
	}
	out := stderr.String()
	for _, name := range []string{"TETHER_UPSTREAM_URL", "TETHER_DIAL_TIMEOUT", "TETHER_BACKOFF_JITTER", "TETHER_UPSTREM_HEADERS"} {
		if !strings.Contains(out, name) {
			t.Errorf("stderr does not name %s:\n%s", name, out)
		}
	}
	if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic") {
		t.Errorf("stderr has a stack trace:\n%s", out)
	}
}

func TestRunCommands(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"version"}, nil, &out, &errOut); err != nil || !strings.HasPrefix(out.String(), "tether ") {
		t.Fatalf("version: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"--help"}, nil, &out, &errOut); err != nil || !strings.Contains(out.String(), "TETHER_UPSTREAM_URL") {
		t.Fatalf("--help: %v\n%s", err, out.String())
	}
	err := run(context.Background(), []string{"frobnicate"}, nil, &out, &errOut)
	if code := exitCode(err, io.Discard); code != 2 {
		t.Fatalf("unknown command exit code = %d (%v), want 2", code, err)
	}
	err = run(context.Background(), nil, map[string]string{}, &out, &errOut)
	if code := exitCode(err, io.Discard); code != 2 || !strings.Contains(err.Error(), "TETHER_UPSTREAM_URL") {
		t.Fatalf("missing URL: exit %d, %v", code, err)
	}
}

// TestListenBusy reports a taken TETHER_LISTEN port as an error naming it.
func TestListenBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := map[string]string{
		"TETHER_UPSTREAM_URL":  "ws://127.0.0.1:1/",
		"TETHER_LISTEN":        ln.Addr().String(),
		"TETHER_ADMIN_LISTEN":  "off",
		"TETHER_LOG_LEVEL":     "error",
		"TETHER_DRAIN_TIMEOUT": "1s",
	}
	err = run(context.Background(), nil, env, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "TETHER_LISTEN") {
		t.Fatalf("run with a busy port = %v, want an error naming TETHER_LISTEN", err)
	}
	if code := exitCode(err, io.Discard); code != 1 {
		t.Fatalf("exit code = %d, want 1", code)
	}
}
