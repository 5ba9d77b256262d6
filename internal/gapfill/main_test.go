package gapfill

import (
	"testing"

	"go.uber.org/goleak"
)

// net/http keeps a goroutine per connection; a Client that is not Closed,
// or a connection that outlives its request, shows up here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
