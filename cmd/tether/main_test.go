package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// admin server and everything main wires up must stop on shutdown. Then
// it removes the binary the tests built.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeBuiltTether()
		os.Exit(code)
	}))
}
