package proxy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every session runs goroutines (the app reader, the upstream watcher, the
// upstream client and its connections): a test that ends with one of them
// still running has found a leak.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
