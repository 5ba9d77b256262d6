package proxy

import (
	"net/http"
	"net/url"

	"github.com/tetherproxy/tether/internal/forwardpath"
	"github.com/tetherproxy/tether/internal/handshake"
)

// Path forwarding (TETHER_FORWARD_PATH): the rules are internal/forwardpath's.

// forwardPath is the upstream URL of an app whose request target is uri:
// with TETHER_FORWARD_PATH on, uri joined onto the upstream URL, and "" when
// it is off; a target that cannot be joined refuses the handshake with 400.
func (s *Server) forwardPath(uri []byte) (string, error) {
	if s.forwardBase == nil {
		return "", nil
	}
	u, err := forwardpath.Join(s.forwardBase, string(uri))
	if err != nil {
		return "", handshake.Refusal(http.StatusBadRequest, err.Error())
	}
	return u.String(), nil
}

// upstreamPath returns the path of a joined upstream URL, for logs (its
// query may hold credentials).
func upstreamPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.EscapedPath()
}
