package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The feed and the sink run goroutines per connection; a run that leaves one
// behind would skew the next run's measurement.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
