package binarytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The bounds of the process's life: building may wait for a machine busy
// compiling race-instrumented tests; starting is reading a few log lines;
// stopping is the drain (TETHER_DRAIN_TIMEOUT, which Start sets to
// DrainTimeout unless the test does) and the exit.
const (
	buildWait = 5 * time.Minute
	startWait = 30 * time.Second
	// DrainTimeout is TETHER_DRAIN_TIMEOUT unless the test sets it.
	DrainTimeout = time.Second
	stopWait     = DrainTimeout + 10*time.Second
	// scrapeWait bounds one scrape of /metrics.
	scrapeWait = 10 * time.Second
	// keepLines is how many of the last log lines a Process keeps for a
	// failing test's output.
	keepLines = 200
)

// Build compiles cmd/tether, without -race, into a directory of the test's
// and returns the binary's path. With -short it skips the test.
func Build(t testing.TB) string {
	t.Helper()
	return build(t)
}

// BuildRace compiles cmd/tether with -race: a test that measures no memory
// runs tether under the race detector as it would run in the test process.
// A race makes the binary exit 66 (see Process.Exited).
func BuildRace(t testing.TB) string {
	t.Helper()
	return build(t, "-race")
}

func build(t testing.TB, flags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the tether binary; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "tether")
	ctx, cancel := context.WithTimeout(context.Background(), buildWait)
	defer cancel()
	args := append(append([]string{"build"}, flags...), "-o", bin, "github.com/tetherproxy/tether/cmd/tether")
	if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// Process is one running tether.
type Process struct {
	cmd       *exec.Cmd
	admin     string
	listeners map[string]string // kind → host:port
	// scraper keeps one connection to the admin server for every scrape:
	// a connection per scrape would leave, at each reading, the last one's
	// descriptor and goroutine in tether for as long as net/http takes to
	// close it, where one kept-alive connection is always exactly one.
	scraper *http.Transport

	mu    sync.Mutex
	lines []string // the last keepLines log lines

	logDone  chan struct{}
	exited   chan struct{}
	waitErr  error
	stopOnce sync.Once
}

// Start runs bin with env (TETHER_* names to values) plus an admin server on
// 127.0.0.1:0, JSON logs at info level and a drain of DrainTimeout, unless
// env sets them. It returns once tether logged "tether started"; Stop runs
// at the end of the test.
func Start(t testing.TB, bin string, env map[string]string) *Process {
	t.Helper()
	full := map[string]string{
		"TETHER_ADMIN_LISTEN":  "127.0.0.1:0",
		"TETHER_LOG_FORMAT":    "json",
		"TETHER_LOG_LEVEL":     "info",
		"TETHER_DRAIN_TIMEOUT": DrainTimeout.String(),
	}
	for k, v := range env {
		full[k] = v
	}
	cmd := exec.Command(bin)
	for k, v := range full {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	killWithParent(cmd.SysProcAttr)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tether: %v", err)
	}
	p := &Process{
		cmd: cmd, listeners: map[string]string{}, scraper: &http.Transport{MaxIdleConnsPerHost: 1},
		logDone: make(chan struct{}), exited: make(chan struct{}),
	}
	t.Cleanup(p.Stop)
	started := make(chan error, 1)
	go p.readLog(stderr, started)
	go p.wait()
	timer := time.NewTimer(startWait)
	defer timer.Stop()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("tether did not start: %v\n%s", err, p.Log())
		}
	case <-timer.C:
		t.Fatalf("tether did not log \"tether started\" within %v\n%s", startWait, p.Log())
	}
	if p.admin == "" {
		t.Fatalf("tether started without logging its admin address\n%s", p.Log())
	}
	return p
}

func (p *Process) wait() {
	err := p.cmd.Wait() // returns once readLog has seen the pipe's end
	p.mu.Lock()
	p.waitErr = err
	p.mu.Unlock()
	close(p.exited)
}

// readLog keeps the log's tail, reads the admin address and the listeners
// until "tether started" (reported on started), and drains the pipe until
// tether exits.
func (p *Process) readLog(r io.Reader, started chan<- error) {
	defer close(p.logDone)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	reported := false
	for sc.Scan() {
		line := sc.Text()
		p.keep(line)
		if !reported && p.startLine(line) {
			reported = true
			started <- nil
		}
	}
	if !reported {
		started <- fmt.Errorf("log ended before \"tether started\": %v", sc.Err())
	}
	_, _ = io.Copy(io.Discard, r) // a line over 1 MiB stopped the scanner
}

// startLine reads one line of the start-up and reports whether it was
// "tether started". It runs only on readLog's goroutine, before Start
// returns.
func (p *Process) startLine(line string) bool {
	var e struct {
		Msg  string `json:"msg"`
		Kind string `json:"kind"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal([]byte(line), &e) != nil {
		return false
	}
	switch e.Msg {
	case "admin server listening":
		p.admin = e.Addr
	case "listening":
		p.listeners[e.Kind] = e.Addr
	}
	return e.Msg == "tether started"
}

func (p *Process) keep(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lines) == keepLines {
		p.lines = append(p.lines[:0], p.lines[1:]...)
	}
	p.lines = append(p.lines, line)
}

// Log is the last lines tether logged, for a failing test's output.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Listener is the host:port of the listener of kind ("ws", "tcp", "sse",
// "unix": a path), or "" if tether opened none.
func (p *Process) Listener(kind string) string { return p.listeners[kind] }

// AdminAddr is the admin server's host:port.
func (p *Process) AdminAddr() string { return p.admin }

// Stop sends SIGTERM, waits for the drain and the exit (SIGKILL after
// stopWait) and for the goroutines of the Process; idempotent. It returns
// nothing: Exited reports how tether ended.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(stopWait)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		<-p.logDone
		p.scraper.CloseIdleConnections()
	})
}

// Exited reports the error of the process's exit (nil for exit 0), once
// Stop has returned.
func (p *Process) Exited() error {
	<-p.exited
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Metrics scrapes /metrics once and returns each metric's value summed
// over its label sets, by name, and each series by itself, by its line's
// name and labels as the exposition writes them
// (tether_gaps_total{outcome="resync"}). A histogram's _count, _sum and
// _bucket are names of their own.
func (p *Process) Metrics(ctx context.Context) (map[string]float64, error) {
	body, err := p.Get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	return ParseMetrics(body)
}

// Get fetches path from the admin server, on the Process's one kept-alive
// connection (concurrent calls may open a second), and returns the body of
// a 200 answer.
func (p *Process) Get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.admin+path, nil)
	if err != nil {
		return nil, err
	}
	// Uncompressed: a gzip answer has tether allocate a compressor of
	// several hundred KiB per scrape, which a GC during the scrape finds
	// alive, and the figures would measure the scrape.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := p.scraper.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, nil
}

// ParseMetrics reads the Prometheus text format: each sample's value,
// summed over label sets, by metric name, and each labelled series by
// itself.
func ParseMetrics(text []byte) (map[string]float64, error) {
	out := map[string]float64{}
	for _, line := range bytes.Split(text, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name, series, rest := line, line, []byte(nil)
		if i := bytes.IndexAny(line, "{ "); i >= 0 {
			name, series, rest = line[:i], line[:i], line[i:]
		}
		if j := bytes.LastIndexByte(rest, '}'); j >= 0 {
			series, rest = line[:len(name)+j+1], rest[j+1:]
		}
		fields := strings.Fields(string(rest))
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[string(name)] += v
		if len(series) > len(name) {
			out[string(series)] = v
		}
	}
	return out, nil
}

// OpenFDs counts the process's open file descriptors (/proc/PID/fd).
func (p *Process) OpenFDs() (int, error) { return OpenFDs(p.Pid()) }

// RSS is the process's resident set size in bytes (VmRSS).
func (p *Process) RSS() (int64, error) { return RSS(p.Pid()) }

// RssAnon is RssAnon(p.Pid()).
func (p *Process) RssAnon() (int64, error) { return RssAnon(p.Pid()) }

// OpenFDs counts the open file descriptors of pid in /proc/PID/fd.
func OpenFDs(pid int) (int, error) {
	if runtime.GOOS != "linux" {
		return 0, errors.New("open descriptors are read from /proc, which only Linux has")
	}
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, err
	}
	return len(entries), nil
}

// RSS reads VmRSS of pid from /proc/PID/status, in bytes.
func RSS(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

// RssAnon reads RssAnon of pid from /proc/PID/status, in bytes: the
// resident memory that is the process's own, without the pages of its
// binary and libraries, which grow as more of its code runs and are no
// memory it allocated.
func RssAnon(pid int) (int64, error) { return statusBytes(pid, "RssAnon") }

// statusBytes reads a "<field>: N kB" line of /proc/PID/status.
func statusBytes(pid int, field string) (int64, error) {
	if runtime.GOOS != "linux" {
		return 0, fmt.Errorf("%s is read from /proc, which only Linux has", field)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v) // "1234 kB"
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("/proc/%d/status: %s %q", pid, field, v)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}
