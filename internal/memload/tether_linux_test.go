package memload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startWait bounds tether's start-up: a binary that listens within
// milliseconds, on a machine that may be busy.
const startWait = 10 * time.Second

// scrapeWait bounds one scrape of /metrics, which tether answers between
// forwarding for hundreds of sessions on a busy machine.
const scrapeWait = 30 * time.Second

// buildDir holds the binary built for this test run; TestMain removes it.
var buildDir string

// buildOnce builds ./cmd/tether once per run. TETHER_MEMLOAD_BIN names
// another binary to run instead: tether built from another commit, to
// measure it in the same scenario (the figures the issue asks for).
var buildOnce = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("TETHER_MEMLOAD_BIN"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "tether-memload-")
	if err != nil {
		return "", err
	}
	buildDir = dir
	bin := filepath.Join(dir, "tether")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/tetherproxy/tether/cmd/tether").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/tether: %w\n%s", err, out)
	}
	return bin, nil
})

// tether is a running tether process.
type tether struct {
	cmd    *exec.Cmd
	addr   string // where apps connect
	admin  string // the admin server, host:port
	exited chan struct{}
	logMu  sync.Mutex
	log    bytes.Buffer // everything it wrote, for a failing test
}

// startTether runs the binary in front of upstream with the TETHER_*=value
// settings env, and waits until it and its admin server listen. Cleanup
// kills it by its pid and waits for it.
func startTether(t *testing.T, upstream string, env ...string) *tether {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append([]string{
		"TETHER_UPSTREAM_URL=" + upstream,
		"TETHER_LISTEN=127.0.0.1:0",
		"TETHER_ADMIN_LISTEN=127.0.0.1:0",
	}, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tt := &tether{cmd: cmd, exited: make(chan struct{})}
	lines := make(chan logLine, 16)
	go tt.follow(stderr, lines)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-tt.exited
		if t.Failed() {
			tt.logMu.Lock()
			t.Logf("tether's log (last 8 KiB):\n%s", tail(tt.log.Bytes(), 8<<10))
			tt.logMu.Unlock()
		}
	})
	deadline := time.After(startWait)
	for tt.addr == "" || tt.admin == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("tether exited before it listened")
			}
			switch l.Msg {
			case "admin server listening":
				tt.admin = l.Addr
			case "tether started":
				tt.addr = l.Listen
			}
		case <-deadline:
			t.Fatalf("tether did not start within %v", startWait)
		}
	}
	return tt
}

type logLine struct {
	Msg    string `json:"msg"`
	Listen string `json:"listen"`
	Addr   string `json:"addr"`
}

// follow keeps tether's log and passes the lines read before start-up on:
// lines is closed after "tether started", or at the end of the log.
func (tt *tether) follow(r io.Reader, lines chan<- logLine) {
	defer close(tt.exited)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	open := true
	for sc.Scan() {
		tt.logMu.Lock()
		tt.log.Write(sc.Bytes())
		tt.log.WriteByte('\n')
		tt.logMu.Unlock()
		var l logLine
		if open && json.Unmarshal(sc.Bytes(), &l) == nil {
			lines <- l
			if l.Msg == "tether started" {
				close(lines)
				open = false
			}
		}
	}
	if open {
		close(lines)
	}
	_ = tt.cmd.Wait()
}

func tail(b []byte, n int) []byte { return b[max(0, len(b)-n):] }

// logged returns the lines of tether's log whose message is msg.
func (tt *tether) logged(msg string) []string {
	tt.logMu.Lock()
	defer tt.logMu.Unlock()
	var out []string
	for line := range strings.SplitSeq(tt.log.String(), "\n") {
		var l logLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			out = append(out, line)
		}
	}
	return out
}

// rss returns tether's resident set size, VmRSS in /proc/PID/status.
func (tt *tether) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tt.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", tt.cmd.Process.Pid)
}

// metrics scrapes /metrics and returns each series' value summed over its
// labels, by metric name. A busy tether may drop a scrape (its admin server
// has a header timeout of its own): each is tried scrapeTries times.
func (tt *tether) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	var err error
	for range scrapeTries {
		var m map[string]float64
		if m, err = tt.scrape(); err == nil {
			return m
		}
	}
	t.Fatalf("scrape /metrics, %d tries: %v", scrapeTries, err)
	return nil
}

const scrapeTries = 3

func (tt *tether) scrape() (map[string]float64, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: scrapeWait}).Get("http://" + tt.admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(series, "{")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[name] += v
	}
	return out, sc.Err()
}
