package interop

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Time bounds. A peer's start is an interpreter loading a library (Python
// takes ~0.2 s) on a CI machine that may be building the race-instrumented
// test binaries of other packages at the same time, hence the wide margin.
// A message needs no more than that either: everything is on loopback.
const (
	startWait   = 15 * time.Second
	messageWait = 10 * time.Second
	// lineBuffer holds the lines a test has not read yet: a feed of 10 ms
	// produces ~100 a second, which the test reads as they come, and tether
	// logs a few lines per reconnect, which most tests never read.
	lineBuffer = 4096
	// outputTail is how much of a process's output is kept for the log of a
	// failed test.
	outputTail = 64 << 10
)

// proc is one child process whose output the test reads line by line: a peer
// script (its stdout, JSON events) or tether (its stderr, JSON logs).
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte   // the followed stream; closed when it ends
	output *tail         // both streams, for the failure log
	stop   chan struct{} // closed by kill: the test reads no more lines
	killed sync.Once
	exited chan struct{} // closed after cmd.Wait returned
}

// startProc starts cmd in its own process group and follows its stdout, or
// its stderr when followStderr is set. The process group is killed, and the
// reader waited for, when the test ends.
func startProc(t *testing.T, name string, cmd *exec.Cmd, followStderr bool) *proc {
	t.Helper()
	p := &proc{
		name:   name,
		cmd:    cmd,
		lines:  make(chan []byte, lineBuffer),
		output: &tail{max: outputTail},
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	own(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	var followed io.ReadCloser
	if followStderr {
		cmd.Stdout = p.output
		followed, err = cmd.StderrPipe()
	} else {
		cmd.Stderr = p.output
		followed, err = cmd.StdoutPipe()
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go p.follow(followed)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("output of %s (last %d bytes):\n%s", name, outputTail, p.output)
		}
	})
	return p
}

// follow hands the stream to the test line by line, then reaps the process.
// Once the process is killed nobody reads the lines any more; stop lets the
// goroutine drain the pipe to its end anyway, so it always ends.
func (p *proc) follow(r io.Reader) {
	defer close(p.exited)
	defer close(p.lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		p.output.Write(append(line, '\n'))
		select {
		case p.lines <- line:
		case <-p.stop:
		}
	}
	// Wait after the last read: it closes the pipe (os/exec's rule).
	_ = p.cmd.Wait()
}

// kill ends the process group with SIGKILL, the way an OOM kill or a crash
// ends a server: no close frame, only what the kernel does with the sockets of
// a dead process. It returns once the process is reaped. Safe to call more
// than once.
func (p *proc) kill() {
	p.killed.Do(func() {
		close(p.stop)
		select {
		case <-p.exited: // reaped: its process group id may belong to another by now
		default:
			killGroup(p.cmd)
		}
		_ = p.stdin.Close()
	})
	<-p.exited
}

// nextLine returns the next line of the followed stream; the test fails if
// none comes within wait or the stream ends.
func (p *proc) nextLine(t *testing.T, wait time.Duration, what string) []byte {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatalf("%s exited while the test waited for %s", p.name, what)
		}
		return line
	case <-timer.C:
		t.Fatalf("%s: waited %s for %s", p.name, wait, what)
		return nil
	}
}

// tail keeps the last max bytes written to it; safe for concurrent use
// (os/exec copies stderr from its own goroutine).
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// event is one line a peer script printed (see the scripts in testdata/).
type event struct {
	Event    string `json:"event"`
	Type     string `json:"type"` // of a message: text or binary
	Data     string `json:"data"` // of a text message
	Size     int    `json:"size"` // of a binary message
	SHA256   string `json:"sha256"`
	Code     int    `json:"code"`
	Reason   string `json:"reason"`
	Protocol string `json:"protocol"`
	Origin   string `json:"origin"`
	Port     int    `json:"port"`
	Version  string `json:"version"`
	Message  string `json:"message"`
	// Of a connection: the extensions the server negotiated, what tether
	// offered, what the server answered. Of stats: socket bytes.
	Extensions string `json:"extensions"`
	Offered    string `json:"offered"`
	Accepted   string `json:"accepted"`
	Written    int64  `json:"written"`
	Read       int64  `json:"read"`
	Count      int    `json:"count"`
	raw        string
}

func (e event) String() string { return e.raw }

// peer is a running peer script.
type peer struct {
	*proc
}

// send writes one command to the script's stdin.
func (p peer) send(t *testing.T, cmd map[string]any) {
	t.Helper()
	line, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		t.Fatalf("command %s to %s: %v", line, p.name, err)
	}
}

// next returns the script's next event.
func (p peer) next(t *testing.T, wait time.Duration, what string) event {
	t.Helper()
	line := p.nextLine(t, wait, what)
	ev := event{raw: string(line)}
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatalf("%s printed a line that is not a JSON event: %q", p.name, line)
	}
	return ev
}

// await returns the first event that match accepts. Events before it are
// skipped, except a close or an error: on a socket that should stay open,
// those are the failure being tested for.
func (p peer) await(t *testing.T, wait time.Duration, what string, match func(event) bool) event {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ev := p.next(t, time.Until(deadline), what)
		if match(ev) {
			return ev
		}
		if ev.Event == "close" || ev.Event == "error" {
			t.Fatalf("%s: %s while waiting for %s", p.name, ev, what)
		}
	}
}

// is matches events by name.
func is(name string) func(event) bool {
	return func(e event) bool { return e.Event == name }
}
