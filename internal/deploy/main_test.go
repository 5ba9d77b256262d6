package deploy

import (
	"testing"

	"go.uber.org/goleak"
)

// Tests skipped for a missing helm are reported at the end, even without -v.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { skipped.Report("internal/deploy") }))
}
