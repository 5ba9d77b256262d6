package interop

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Each process has a goroutine reading its output: one still running after
// the tests means a process (and its reader) outlived its test. Tests
// skipped for a missing peer are reported at the end, even without -v.
//
// Re-executed with cfServerEnv set, the binary is the centrifuge preset's
// server instead (centrifuge_server_test.go).
func TestMain(m *testing.M) {
	if v := os.Getenv(cfServerEnv); v != "" {
		os.Exit(cfServerFromEnv(v))
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		skipped.Report("internal/interop")
		if buildDir != "" {
			_ = os.RemoveAll(buildDir)
		}
	}))
}
