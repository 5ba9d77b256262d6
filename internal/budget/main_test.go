package budget

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests start reserving goroutines of their own; one left waiting on
// Freed shows up here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
