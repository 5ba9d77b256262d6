package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/tetherproxy/tether/internal/config"
	"go.uber.org/zap"
)

// staleProbeTimeout bounds the dial that tells a live socket from one left
// behind by a process that died: a listening process accepts into its backlog
// at once, so a second is generous.
const staleProbeTimeout = time.Second

// Errors of listenUnix that tests and callers tell apart.
var (
	errSocketInUse = errors.New("another process is listening on the socket")
	errNotSocket   = errors.New("the path exists and is not a unix socket")
)

// listenUnix listens on a unix socket at path with the given permission bits.
// A socket file left by a process that died (a kill -9, a crash) is removed
// first, or bind(2) would fail with "address already in use" until someone
// deletes it by hand; a socket someone still listens on, and any file that is
// not a socket, are left alone and reported.
//
// The returned listener removes the file when closed: Go's UnixListener
// unlinks the path it bound on Close (SetUnlinkOnClose defaults to true for
// listeners made by net.Listen), which drain and every start-up failure path
// rely on.
func listenUnix(path string, mode fs.FileMode, log *zap.Logger) (net.Listener, error) {
	if err := removeStaleSocket(path, log); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// bind(2) created the file with 0777 less the umask; set the mode the
	// operator asked for before any app can be accepted (Serve has not
	// started yet). The directory's permissions guard the moment between.
	if err := os.Chmod(path, mode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("set socket mode %s: %w", config.SocketMode(mode), err)
	}
	return ln, nil
}

// removeStaleSocket clears path for bind(2) when it holds a dead socket. It
// removes nothing else: not a regular file (TETHER_LISTEN pointed at the
// wrong path), not a socket that answers, not one it cannot probe.
func removeStaleSocket(path string, log *zap.Logger) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("inspect %s: %w", path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%s: %w (%s); tether never removes it", path, errNotSocket, fileKind(fi.Mode()))
	}
	conn, err := net.DialTimeout("unix", path, staleProbeTimeout)
	if err == nil {
		_ = conn.Close()
		return fmt.Errorf("%s: %w", path, errSocketInUse)
	}
	// Only a refused connection proves that no one listens. A full backlog
	// (EAGAIN), a timeout or a permission error prove nothing.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot tell whether %s is in use, remove it if it is not: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	log.Info("removed stale unix socket", zap.String("path", path))
	return nil
}

// fileKind names a file type for the refusal message.
func fileKind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "file type " + t.String()
	}
}
