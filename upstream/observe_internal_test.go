package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

func TestDialResult(t *testing.T) {
	opErr := func(err error) error {
		return fmt.Errorf("dial upstream: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)})
	}
	tests := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{&StatusError{Status: 401}, "http_401"},
		{&StatusError{Status: 403}, "http_403"},
		{&StatusError{Status: 429}, "http_429"},
		{&StatusError{Status: 503}, "http_5xx"},
		{&StatusError{Status: 500}, "http_5xx"},
		{&StatusError{Status: 404}, "http_4xx"},
		{&StatusError{Status: 408}, "http_4xx"},
		{&StatusError{Status: 302}, "http_other"},
		{&badURLError{err: errors.New("no host")}, "bad_url"},
		{&tokenError{err: os.ErrNotExist}, "token"},
		{fmt.Errorf("dial upstream: %w", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}), "dns"},
		{fmt.Errorf("dial upstream: %w", x509.UnknownAuthorityError{}), "tls"},
		{fmt.Errorf("dial upstream: %w", tls.AlertError(42)), "tls"},
		{fmt.Errorf("dial upstream: %w", context.DeadlineExceeded), "timeout"},
		{opErr(syscall.ECONNREFUSED), "refused"},
		{opErr(syscall.ECONNRESET), "network"},
		{fmt.Errorf("dial upstream: %w", io.ErrUnexpectedEOF), "network"},
	}
	for _, tc := range tests {
		if got := dialResult(tc.err); got != tc.want {
			t.Errorf("dialResult(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestLossReason(t *testing.T) {
	tests := []struct {
		err    error
		reason string
		code   int
	}{
		{&CloseError{Code: 1012, Reason: "restart"}, "close", 1012},
		{&CloseError{Code: 4001}, "close", 4001},
		{ErrHeartbeatTimeout, "heartbeat", 0},
		{&restoreError{err: wsconn.ErrClosed}, "restore", 0},
		{&wsconn.ProtocolError{Code: ws.StatusProtocolError, Reason: "bad frame"}, "protocol", 0},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "reset", 0},
		{&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, "reset", 0},
		{io.EOF, "eof", 0},
		{io.ErrUnexpectedEOF, "eof", 0},
		{errors.New("something else"), "network", 0},
	}
	for _, tc := range tests {
		reason, code := lossReason(tc.err)
		if reason != tc.reason || code != tc.code {
			t.Errorf("lossReason(%v) = %q, %d, want %q, %d", tc.err, reason, code, tc.reason, tc.code)
		}
	}
}
