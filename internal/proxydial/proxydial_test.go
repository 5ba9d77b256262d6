package proxydial

import (
	"errors"
	"testing"
)

// TestProxyErrorText: what each Error says.
func TestProxyErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Addr: "p:3128", Status: 407, Authorized: true}, "proxy rejected credentials (HTTP 407)"},
		{&Error{Addr: "p:3128", Status: 407}, "proxy requires credentials (HTTP 407): none are set; put them in the proxy URL, http://user:password@host:port"},
		{&Error{Addr: "p:3128", Status: 403, Reason: "Access violation"}, `proxy p:3128 answered HTTP 403 "Access violation"`},
		{&Error{Addr: "p:3128", Status: 502}, "proxy p:3128 answered HTTP 502"},
		{&Error{Addr: "p:3128", Err: errors.New("connect: connection refused")}, "proxy p:3128: connect: connection refused"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
