package upstream_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a Client's
// run loop, a connection's reader, writer or restore goroutine, or a test
// server's, must all have ended once their owners are closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
