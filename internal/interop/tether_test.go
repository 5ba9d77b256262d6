package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// tether's reconnect delays in these tests: small, so that a restarted
// upstream is found quickly, and bounded, so that the wait for it is too.
const (
	backoffBase = 50 * time.Millisecond
	backoffCap  = 200 * time.Millisecond
	// reconnectWait bounds the time from a restarted upstream listening to
	// tether's new connection being accepted: at most one backoff delay, one
	// dial, and the peer's own scheduling on a busy machine.
	reconnectWait = backoffCap + messageWait
)

// socketFaults returns settings with tether's heartbeat settings for the
// preset tests whose faults all end the upstream connection at the socket
// (a TCP reset, a close frame, a killed or stopped server, refused dials):
// tether's ping finds none of them. It still pings every 500 ms, so that
// its pings and the peers' pongs go through every connection, but the
// timeout is as long as any wait for a message: a pong that a loaded
// machine delays past half a second must not end a healthy connection,
// since the tests count what a loss replays (operations run, subscriptions
// made, acknowledgements seen), and a loss of tether's own making changes
// the counts.
func socketFaults(settings ...string) []string {
	return append(append([]string(nil), settings...), "TETHER_PING_INTERVAL=500ms", "TETHER_PING_TIMEOUT="+messageWait.String())
}

// buildDir holds the binary built for this test run; TestMain removes it.
var buildDir string

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "tether-interop-")
	if err != nil {
		return "", err
	}
	buildDir = dir
	bin := filepath.Join(dir, "tether")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/tetherproxy/tether/cmd/tether").CombinedOutput()
	if err != nil {
		return "", &buildError{err: err, output: string(out)}
	}
	return bin, nil
})

type buildError struct {
	err    error
	output string
}

func (e *buildError) Error() string {
	return "go build ./cmd/tether: " + e.err.Error() + "\n" + e.output
}

// tether is a running tether binary.
type tether struct {
	addr string // where the app connects, "127.0.0.1:port"
	log  *proc  // its JSON log, after "tether started"
}

// startTether runs the tether binary as the README shows, in front of
// upstream, with extra TETHER_*=value settings, and waits until it listens.
func startTether(t *testing.T, upstream string, extra ...string) tether {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"TETHER_UPSTREAM_URL=" + upstream,
		"TETHER_LISTEN=127.0.0.1:0",
		"TETHER_ADMIN_LISTEN=off",
		"TETHER_BACKOFF_BASE=" + backoffBase.String(),
		"TETHER_BACKOFF_CAP=" + backoffCap.String(),
	}
	cmd.Env = append(cmd.Env, extra...)
	p := startProc(t, "tether", cmd, true)
	started := awaitLog(t, p, startWait, "tether started")
	return tether{addr: started.Listen, log: p}
}

// url is the address the app dials.
func (tt tether) url() string {
	return "ws://" + tt.addr + "/"
}

// logEntry is the part of tether's JSON log lines the tests read.
type logEntry struct {
	Msg    string `json:"msg"`
	Listen string `json:"listen"`
	Reason string `json:"reason"`
}

// awaitLog reads tether's log up to the first line with message msg (the
// README names the lines: "tether started", "upstream reconnect scheduled").
// In these tests the app never leaves while tether's log is watched, so an
// "app closed" line on the way is a failure, reported as soon as it is seen.
func awaitLog(t *testing.T, p *proc, wait time.Duration, msg string) logEntry {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		line := p.nextLine(t, time.Until(deadline), fmt.Sprintf("the log line %q", msg))
		var entry logEntry
		if json.Unmarshal(line, &entry) != nil {
			continue
		}
		if entry.Msg == msg {
			return entry
		}
		if entry.Msg == "app closed" {
			t.Fatalf("tether closed the app while the test waited for %q: %s", msg, line)
		}
	}
}
