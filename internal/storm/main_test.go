package storm

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind. The
// simulation starts none; the conformance test runs a real upstream.Client
// and a loopback server, whose goroutines must all end when they are closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
