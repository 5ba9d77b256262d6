package sequence

import (
	"testing"

	"go.uber.org/goleak"
)

// A Sequencer runs a goroutine per catch-up and, with the System clock, per
// gap timer callback: Stop must leave none behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
