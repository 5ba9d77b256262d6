package sendq

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests start senders and writers of their own; one that is left blocked
// in Reserve shows up here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
