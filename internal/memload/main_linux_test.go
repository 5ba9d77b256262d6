package memload

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Every flood, app and process reader is a goroutine the test waits for;
// one still running after the tests outlived its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if buildDir != "" {
			_ = os.RemoveAll(buildDir)
		}
	}))
}
