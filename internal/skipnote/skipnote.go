// Package skipnote makes a test skipped for a missing peer visible. t.Skip
// alone is silent: `go test ./...` prints only "ok" for a package whose tests
// passed or skipped unless -v is set, and it discards everything the test
// binary wrote, stderr included. A package's tests Add a reason for each skip
// and its TestMain calls Report at the end.
//
// It is imported by tests only (it reads testing.Verbose), never by the
// tether binary.
package skipnote

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
)

// Notes counts skipped tests per reason, in the order reasons appear. It is
// safe for concurrent use; the zero value is ready.
type Notes struct {
	mu      sync.Mutex
	reasons []string
	counts  map[string]int
}

// Add records one test skipped for reason.
func (s *Notes) Add(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	if s.counts[reason] == 0 {
		s.reasons = append(s.reasons, reason)
	}
	s.counts[reason]++
}

// Report writes one line per reason, when there is any, where the person
// running the tests sees it (see noteWriter).
func (s *Notes) Report(pkg string) {
	s.mu.Lock()
	var b strings.Builder
	for _, r := range s.reasons {
		fmt.Fprintf(&b, "%s: %d test(s) SKIPPED: %s\n", pkg, s.counts[r], r)
	}
	s.mu.Unlock()
	if b.Len() == 0 {
		return
	}
	w, done := noteWriter()
	defer done()
	_, _ = io.WriteString(w, b.String())
}

// noteWriter is the controlling terminal when there is one and -v is off:
// in package list mode (`go test ./...`) go test discards a passing
// package's output, so only the terminal reaches the developer. Otherwise
// (-v, go test -json, no terminal: CI, an IDE) stderr, which go test shows.
func noteWriter() (io.Writer, func()) {
	if !testing.Verbose() {
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			return tty, func() { _ = tty.Close() }
		}
	}
	return os.Stderr, func() {}
}
