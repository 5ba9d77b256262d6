package interop

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Each process has a goroutine reading its output: one still running after
// the tests means a process (and its reader) outlived its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if buildDir != "" {
			_ = os.RemoveAll(buildDir)
		}
	}))
}
