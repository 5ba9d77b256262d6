package churn_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The in-process churn runs tether's sessions, the upstream and every app in
// this process: a goroutine still running after it is a leak.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
