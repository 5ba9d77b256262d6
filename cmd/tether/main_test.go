package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// admin server and everything main wires up must stop on shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
