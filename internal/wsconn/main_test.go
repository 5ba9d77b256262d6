package wsconn_test

import (
	"testing"

	"go.uber.org/goleak"
)

// A Conn's writer goroutine runs while a burst is left to it; a test that
// forgets Close or Abort, or a writer that fails to exit, shows up here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
