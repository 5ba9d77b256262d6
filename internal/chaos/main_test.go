package chaos_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The soak runs tether's sessions, the fault proxy, the upstream server and
// the app: a goroutine still running after it is a leak.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
