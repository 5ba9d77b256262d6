package upstreamtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gobwas/ws"
)

// handshakeTimeout bounds reading the request and writing the response, so a
// client that connects and says nothing cannot pin a goroutine forever.
const handshakeTimeout = 5 * time.Second

// request collects what the upgrader parsed from one handshake request.
type request struct {
	path      string
	header    http.Header
	protocols []string
	selected  string
}

// handshake answers the handshake on raw. It returns the upgraded Conn, or an
// error when the request was refused (by Options.Handshake or as malformed)
// or the connection failed.
func (s *Server) handshake(raw net.Conn) (*Conn, error) {
	if err := raw.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return nil, fmt.Errorf("set handshake deadline: %w", err)
	}
	req := &request{header: make(http.Header)}
	// The response is collected in out and written with a single Write, so
	// that a Greeting frame shares the TCP segment of the 101 response.
	var out bytes.Buffer
	_, upErr := s.upgrader(req).Upgrade(struct {
		io.Reader
		io.Writer
	}{oneByteReader{raw}, &out})
	if upErr == nil && s.opts.Greeting != "" {
		appendFrame(&out, ws.OpText, true, []byte(s.opts.Greeting))
	}
	if _, err := raw.Write(out.Bytes()); err != nil {
		return nil, fmt.Errorf("write handshake response: %w", err)
	}
	if upErr != nil {
		return nil, fmt.Errorf("upgrade: %w", upErr)
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("clear handshake deadline: %w", err)
	}
	return newConn(s, raw, req), nil
}

func (s *Server) upgrader(req *request) ws.Upgrader {
	return ws.Upgrader{
		OnRequest: func(uri []byte) error {
			req.path = string(uri)
			return nil
		},
		OnHost: func(host []byte) error {
			req.header.Set("Host", string(host))
			return nil
		},
		OnHeader: func(key, value []byte) error {
			req.header.Add(string(key), string(value))
			return nil
		},
		// Selecting nothing here keeps every Sec-WebSocket-Protocol line
		// flowing into this callback (gobwas stops calling it once a protocol
		// is chosen); the choice is made in OnBeforeUpgrade with all offers.
		ProtocolCustom: func(value []byte) (string, bool) {
			req.protocols = append(req.protocols, splitTokens(string(value))...)
			return "", true
		},
		OnBeforeUpgrade: func() (ws.HandshakeHeader, error) {
			return s.decide(req)
		},
	}
}

// decide consults Options.Handshake and picks the subprotocol.
func (s *Server) decide(req *request) (ws.HandshakeHeader, error) {
	n := int(s.handshakes.Add(1))
	var status int
	var header http.Header
	if s.opts.Handshake != nil {
		status, header = s.opts.Handshake(Handshake{
			N:         n,
			Header:    req.header.Clone(),
			Path:      req.path,
			Protocols: slices.Clone(req.protocols),
		})
	}
	if status != 0 {
		return nil, ws.RejectConnectionError(
			ws.RejectionStatus(status),
			ws.RejectionHeader(ws.HandshakeHeaderHTTP(header)),
			ws.RejectionReason(fmt.Sprintf("refused by test server with HTTP %d", status)),
		)
	}
	req.selected = selectProtocol(req.protocols, s.opts.Subprotocols)
	if req.selected != "" {
		header = header.Clone()
		if header == nil {
			header = make(http.Header)
		}
		header.Set("Sec-WebSocket-Protocol", req.selected)
	}
	return ws.HandshakeHeaderHTTP(header), nil
}

// selectProtocol returns the first offered protocol that is supported.
func selectProtocol(offered, supported []string) string {
	for _, p := range offered {
		if slices.Contains(supported, p) {
			return p
		}
	}
	return ""
}

func splitTokens(value string) []string {
	var out []string
	for _, p := range strings.Split(value, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// oneByteReader hands the upgrader one byte per Read, so its internal
// bufio.Reader never consumes bytes past the end of the request: frames a
// client sends right behind its request stay in the socket for the frame
// reader instead of vanishing with the upgrader's buffer.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}
