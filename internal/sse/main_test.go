package sse

import (
	"testing"

	"go.uber.org/goleak"
)

// The HTTP test runs a server and a client; neither may outlive it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
