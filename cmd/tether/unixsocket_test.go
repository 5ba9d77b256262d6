package main

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// shortTempDir is a fresh directory with a short path: a unix socket path
// must fit in about 104 bytes, which t.TempDir's (named after the test)
// often exceeds.
func shortTempDir(t *testing.T) string {
	t.Helper()
	needUnixSockets(t)
	dir, err := os.MkdirTemp("", "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// needUnixSockets skips tests that configure unix:// listeners on Windows,
// where tether refuses them.
func needUnixSockets(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("tether refuses unix:// listeners on Windows")
	}
}

// staleSocket leaves a socket file behind with no one listening, as a
// process killed with SIGKILL does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("stale socket not left behind: %v, %v", fi, err)
	}
}

func observedLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// A socket left by a dead process is removed, logged, and listened on anew
// with the configured mode; closing the listener removes the file.
func TestUnixStaleSocketReplaced(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "s.sock")
	staleSocket(t, path)
	log, logs := observedLogger()
	ln, err := listenUnix(path, 0o660, log)
	if err != nil {
		t.Fatalf("listenUnix over a stale socket: %v", err)
	}
	if e := logs.FilterMessage("removed stale unix socket").All(); len(e) != 1 || e[0].ContextMap()["path"] != path {
		t.Errorf("log entries %v, want one \"removed stale unix socket\" with path %s", logs.All(), path)
	}
	checkMode(t, path, 0o660)
	dialUnix(t, path)
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file after Close: %v, want it removed", err)
	}
}

// A socket someone listens on is left alone: tether refuses to start
// rather than steal it.
func TestUnixLiveSocketRefused(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "s.sock")
	other, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		// The other process accepts the probe like any client.
		if c, err := other.Accept(); err == nil {
			_ = c.Close()
		}
	}()
	log, logs := observedLogger()
	ln, err := listenUnix(path, 0o600, log)
	if err == nil {
		_ = ln.Close()
		t.Fatal("listenUnix on a live socket succeeded")
	}
	if !errors.Is(err, errSocketInUse) || !strings.Contains(err.Error(), "another process is listening on the socket") || !strings.Contains(err.Error(), path) {
		t.Errorf("error = %v, want errSocketInUse naming %s", err, path)
	}
	if logs.Len() != 0 {
		t.Errorf("logged %v, want nothing", logs.All())
	}
	dialUnix(t, path) // still the other process's
}

// Nothing but a socket is ever removed: a regular file, a directory and a
// symbolic link (even to a stale socket) are refused and left as they were.
func TestUnixNonSocketRefused(t *testing.T) {
	dir := shortTempDir(t)
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "d")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "s.sock")
	staleSocket(t, stale)
	link := filepath.Join(dir, "l")
	if err := os.Symlink(stale, link); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{file: "a regular file", sub: "a directory", link: "a symbolic link"} {
		ln, err := listenUnix(path, 0o600, zap.NewNop())
		if err == nil {
			_ = ln.Close()
			t.Errorf("listenUnix(%s) succeeded over %s", path, kind)
			continue
		}
		if !errors.Is(err, errNotSocket) || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), "tether never removes it") {
			t.Errorf("listenUnix(%s) = %v, want errNotSocket naming %s", path, err, kind)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "precious" {
		t.Errorf("regular file after the refusal: %q, %v", b, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("symbolic link after the refusal: %v, %v", fi, err)
	}
	if fi, err := os.Lstat(stale); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Errorf("the link's target after the refusal: %v, %v", fi, err)
	}
}

// The mode is applied whatever the umask made of the file, both ways:
// tighter and looser than bind(2) left it.
func TestUnixSocketModeApplied(t *testing.T) {
	dir := shortTempDir(t)
	for i, mode := range []fs.FileMode{0o600, 0o660, 0o666, 0o222} {
		path := filepath.Join(dir, string(rune('a'+i))+".sock")
		ln, err := listenUnix(path, mode, zap.NewNop())
		if err != nil {
			t.Fatalf("listenUnix mode %o: %v", mode, err)
		}
		checkMode(t, path, mode)
		_ = ln.Close()
	}
}

// A missing directory is an error naming the path; nothing is created.
func TestUnixMissingDirectory(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "no", "s.sock")
	ln, err := listenUnix(path, 0o600, zap.NewNop())
	if err == nil {
		_ = ln.Close()
		t.Fatal("listenUnix in a missing directory succeeded")
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %v does not name %s", err, path)
	}
}

// When one listener cannot be opened, the error names its entry and the
// listeners opened before it are closed: a unix socket's file is gone and a
// TCP port is free again.
func TestOpenListenersAllOrNone(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "s.sock")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free := freePort(t)
	var list config.ListenList
	entries := "unix://" + sock + ",tcp://" + free + ",127.0.0.1:0,tcp://" + busy.Addr().String()
	if err := list.UnmarshalText([]byte(entries)); err != nil {
		t.Fatal(err)
	}
	lns, err := openListeners(list, 0o600, zap.NewNop())
	if err == nil {
		closeListeners(lns)
		t.Fatal("openListeners succeeded with a busy port")
	}
	want := `listen on TETHER_LISTEN entry 4 "tcp://` + busy.Addr().String() + `": `
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %q, want it to start with %q", err, want)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket of entry 1 after the failure: %v, want it removed", err)
	}
	again, err := net.Listen("tcp", free)
	if err != nil {
		t.Errorf("port of entry 2 still taken after the failure: %v", err)
	} else {
		_ = again.Close()
	}
}

// freePort returns a loopback host:port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != want {
		t.Errorf("%s: mode %v, want a socket with %v", path, fi.Mode(), want)
	}
}

// dialUnix fails unless something accepts connections at path.
func dialUnix(t *testing.T, path string) {
	t.Helper()
	c, err := net.DialTimeout("unix", path, waitLimit)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	_ = c.Close()
}
