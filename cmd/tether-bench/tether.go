package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// tetherPackage is built when -tether is not given; go build resolves it in
// the module of the current directory.
const tetherPackage = "github.com/tetherproxy/tether/cmd/tether"

// buildTether builds the tether binary into dir.
func buildTether(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "tether")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, tetherPackage).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s (run tether-bench from the tether repository, or pass -tether): %w\n%s",
			tetherPackage, err, out)
	}
	return bin, nil
}

// tetherKnows reports whether the binary's --help lists variable name: the
// sequencing variables only exist from the release that added them.
func tetherKnows(bin, name string) bool {
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	return bytes.Contains(out, []byte(name))
}

// seqDefaults turn sequencing on when the binary supports it: the feed's
// messages carry their number at "seq".
var seqDefaults = map[string]string{"TETHER_SEQ_PATH": "seq"}

// tetherSetup is how tether runs in the benchmark.
type tetherSetup struct {
	bin         string
	feedURL     string
	maxSessions int
	sequencing  bool              // the binary knows TETHER_SEQ_PATH
	passed      map[string]string // TETHER_* from this process's environment
}

// ownedVars are set by the tool; the same variables in the environment are
// ignored (reported at start-up).
var ownedVars = []string{"TETHER_UPSTREAM_URL", "TETHER_LISTEN", "TETHER_ADMIN_LISTEN"}

// env is the subprocess environment: this process's environment without its
// TETHER_* variables, then the tool's defaults, the TETHER_* variables passed
// through (they override the defaults), and the addresses the tool owns.
func (s tetherSetup) env(listen, admin string) ([]string, map[string]string) {
	vars := map[string]string{
		"TETHER_LOG_LEVEL":     "warn", // nothing per session on stderr
		"TETHER_DRAIN_TIMEOUT": "1s",
		"TETHER_MAX_SESSIONS":  strconv.Itoa(s.maxSessions),
	}
	if s.sequencing {
		maps.Copy(vars, seqDefaults)
	}
	maps.Copy(vars, s.passed)
	vars["TETHER_UPSTREAM_URL"] = s.feedURL
	vars["TETHER_LISTEN"] = listen
	vars["TETHER_ADMIN_LISTEN"] = admin
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TETHER_") {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env, vars
}

// passedTetherEnv returns the TETHER_* variables of environ that the tool
// passes to tether, and those it ignores because it sets them itself.
func passedTetherEnv(environ []string) (passed map[string]string, ignored []string) {
	passed = map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "TETHER_") {
			continue
		}
		if slices.Contains(ownedVars, k) {
			ignored = append(ignored, k)
			continue
		}
		passed[k] = v
	}
	slices.Sort(ignored)
	return passed, ignored
}

// tetherProc is a running tether.
type tetherProc struct {
	*process
	addr  string // app listener
	admin string // admin server (/metrics)
	vars  map[string]string
}

func startTether(ctx context.Context, s tetherSetup, dir, name string) (*tetherProc, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env, vars := s.env(listen, admin)
	cmd := exec.Command(s.bin)
	cmd.Env = env
	p, err := startProcess(name, cmd, filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	if err := p.waitListening(ctx, 10*time.Second, listen, admin); err != nil {
		_ = p.stop()
		return nil, err
	}
	return &tetherProc{process: p, addr: listen, admin: admin, vars: vars}, nil
}

// URL is where an app connects.
func (t *tetherProc) URL() string { return "ws://" + t.addr + "/" }
