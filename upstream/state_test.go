package upstream_test

import (
	"testing"

	"github.com/tetherproxy/tether/upstream"
)

func TestStateString(t *testing.T) {
	tests := []struct {
		s    upstream.State
		want string
	}{
		{upstream.StateConnecting, "connecting"},
		{upstream.StateOpen, "open"},
		{upstream.StateConfirmed, "confirmed"},
		{upstream.StateLost, "lost"},
		{upstream.StateWaiting, "waiting"},
		{upstream.StateClosed, "closed"},
		{upstream.State(6), "State(6)"},
		{upstream.State(-1), "State(-1)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("State(%d).String() = %q, want %q", int(tt.s), got, tt.want)
		}
	}
}

// TestStateZeroIsConnecting: a freshly built client starts by dialing, so the
// zero value must mean connecting, not closed.
func TestStateZeroIsConnecting(t *testing.T) {
	var s upstream.State
	if s != upstream.StateConnecting {
		t.Errorf("zero State = %v, want connecting", s)
	}
}
