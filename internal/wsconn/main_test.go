package wsconn_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every Conn owns a writer goroutine; a test that forgets Close or Abort, or a
// writer that fails to exit, shows up here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
