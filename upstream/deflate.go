package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/gobwas/httphead"
	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsflate"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// Compression is whether tether offers permessage-deflate (RFC 7692) to a
// WebSocket upstream (TETHER_UPSTREAM_COMPRESSION). The app side is never
// compressed.
type Compression int

const (
	// CompressionAuto offers permessage-deflate and uses it when the
	// upstream accepts, on the terms it accepted.
	CompressionAuto Compression = iota
	// CompressionOff offers nothing: every message travels as it is.
	CompressionOff
)

var compressionNames = [...]string{CompressionAuto: "auto", CompressionOff: "off"}

// String returns the name ParseCompression accepts.
func (c Compression) String() string {
	if c >= 0 && int(c) < len(compressionNames) {
		return compressionNames[c]
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

// ParseCompression parses "auto" or "off", ignoring case and surrounding
// space.
func ParseCompression(s string) (Compression, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	for c, name := range compressionNames {
		if v == name {
			return Compression(c), nil
		}
	}
	return 0, fmt.Errorf("unknown compression mode %q: want auto or off", s)
}

// UnmarshalText implements encoding.TextUnmarshaler for configuration parsers.
func (c *Compression) UnmarshalText(b []byte) error {
	v, err := ParseCompression(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// deflateOffer is what tether offers: permessage-deflate, with
// client_no_context_takeover, since tether compresses each message on its
// own and the server need not keep a window for it, and
// client_max_window_bits without a value, so the server may limit the
// window of tether's messages (RFC 7692 §7.1.2.2). The server's own window
// and context takeover are left to it: tether inflates whatever it
// chooses.
var deflateOffer = wsflate.Parameters{ClientNoContextTakeover: true, ClientMaxWindowBits: 1}.Option()

// extensionError is an upstream's acceptance of permessage-deflate that
// breaks RFC 7692 §7: the connection must fail (§5).
type extensionError struct{ err error }

func (e *extensionError) Error() string {
	return "upstream accepted permessage-deflate wrongly: " + e.err.Error()
}
func (e *extensionError) Unwrap() error { return e.err }

// negotiatedDeflate reads the upstream's answer to the offer: nil when it
// did not accept, otherwise how to read and write. gobwas has already
// refused extensions that were not offered.
func negotiatedDeflate(hs ws.Handshake) (*wsconn.Deflate, error) {
	var accepted []httphead.Option
	for _, opt := range hs.Extensions {
		if bytes.Equal(opt.Name, wsflate.ExtensionNameBytes) {
			accepted = append(accepted, opt)
		}
	}
	switch len(accepted) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, &extensionError{err: errors.New("more than once")}
	}
	var p wsflate.Parameters
	if err := p.Parse(accepted[0]); err != nil {
		return nil, &extensionError{err: err}
	}
	if p.ClientMaxWindowBits == 1 {
		// A value-less client_max_window_bits is for offers only (§7.1.2.2).
		return nil, &extensionError{err: errors.New("client_max_window_bits without a value")}
	}
	return &wsconn.Deflate{
		PeerNoContextTakeover: p.ServerNoContextTakeover,
		// compress/flate always uses a 32 KiB window: below 15 bits, tether
		// honours the limit by sending uncompressed messages.
		Compress: !p.ClientMaxWindowBits.Defined() || p.ClientMaxWindowBits == 15,
	}, nil
}
