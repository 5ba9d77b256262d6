// Package handshake bounds an app's handshake request and shapes tether's
// answer when it refuses one, for the WebSocket and sse:// listeners of
// package proxy: a reader that stops at MaxRequestBytes, the 431 answer to
// a request over it, a refusal carrying an HTTP status and a one-line
// reason, and the lingering close that lets a refused app read that
// answer. No goroutines, no state: safe from any goroutine.
package handshake

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// MaxRequestBytes bounds an app's handshake request: gobwas reads headers of
// any size otherwise. A larger request is answered 431.
const MaxRequestBytes = 16 << 10

// ErrTooLarge stops reading an app's handshake request at MaxRequestBytes;
// the app is answered TooLargeResponse.
var ErrTooLarge = errors.New("handshake request exceeds 16 KiB")

// TooLargeResponse answers a request over MaxRequestBytes, which gobwas
// drops without an answer.
var TooLargeResponse = "HTTP/1.1 431 Request Header Fields Too Large\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(tooLargeBody)) + "\r\n\r\n" + tooLargeBody

const tooLargeBody = "request headers exceed 16 KiB"

// Reader reads an app's handshake request, failing with ErrTooLarge once
// MaxRequestBytes have been read. (io.LimitReader's plain EOF could not be
// told from an app that hung up.)
type Reader struct {
	r    io.Reader
	left int
}

// NewReader reads the handshake request from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r, left: MaxRequestBytes} }

func (h *Reader) Read(p []byte) (int, error) {
	if h.left <= 0 {
		return 0, ErrTooLarge
	}
	if len(p) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= n
	return n, err
}

// Refusal is a refused handshake's error: the HTTP status the app is
// answered with, and reason as its one-line body (OneLine).
func Refusal(status int, reason string) error {
	return ws.RejectConnectionError(ws.RejectionStatus(status), ws.RejectionReason(OneLine(reason)))
}

// maxRefusalBody bounds the one-line body of a refused handshake.
const maxRefusalBody = 300

// OneLine keeps an error readable in a one-line HTTP body of at most
// maxRefusalBody bytes, cut at a character boundary: the body is sent as
// charset=utf-8, and the error may quote an upstream's reason in any script.
func OneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > maxRefusalBody {
		cut := maxRefusalBody
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return strings.TrimSpace(s)
}

// Linger bounds how long a refused app's socket is drained before it is
// closed (CloseRefused).
const Linger = 500 * time.Millisecond

// CloseRefused lets a refused app read tether's answer before the socket
// closes. Closing a socket whose receive buffer still holds request bytes
// (the headers after a refused Origin, say) makes the kernel send RST, and a
// client that gets the RST first may lose the answer (the lingering close of
// RFC 9112 §9.6): so half-close, then drain what the app still sends for at
// most Linger. The caller closes nc.
func CloseRefused(nc net.Conn) {
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = nc.SetReadDeadline(time.Now().Add(Linger))
	_, _ = io.Copy(io.Discard, io.LimitReader(nc, MaxRequestBytes))
}
