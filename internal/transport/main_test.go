package transport

import (
	"testing"

	"go.uber.org/goleak"
)

// Every LineConn owns a writer goroutine and every SSEApp a linger timer; a
// test that forgets to close one, or a writer that fails to exit, shows up
// here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
