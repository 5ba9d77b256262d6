// Command tether is a sidecar that gives a naive WebSocket app a stable local
// socket while it keeps a resilient upstream connection on the app's behalf.
// Configuration comes only from TETHER_* environment variables; `tether --help`
// lists them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tetherproxy/tether/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling: a second
		// Ctrl-C kills a drain that takes too long.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], environ(), os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

// environ returns the process environment as a map.
func environ() map[string]string {
	m := make(map[string]string)
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// usageError is a bad command line: exit code 2, like a bad configuration.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// exitCode prints err once and maps it: 0 success, 2 user error (configuration
// or command line), 1 anything else.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "tether:", err)
	var ce *config.Error
	var ue *usageError
	if errors.As(err, &ce) || errors.As(err, &ue) {
		return 2
	}
	return 1
}

// run is main without the process: arguments, environment and output are
// passed in, so tests drive it directly.
func run(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) error {
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "":
		return runSidecar(ctx, env, stderr)
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "service":
		return runServiceCommand(ctx, args[1:], env, stdout)
	case "status":
		return runStatus(ctx, args[1:], env, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return nil
	case "help", "--help", "-help", "-h":
		writeHelp(stdout)
		return nil
	}
	return &usageError{msg: fmt.Sprintf("unknown command %q (run tether --help)", cmd)}
}
