package upstream_test

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/gobwas/httphead"
	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/upstream"
)

// deflateServer is a scripted upstream that negotiates permessage-deflate
// itself (gobwas' Upgrader with a Negotiate of the test's choosing) and
// then runs script on the raw connection, writing compressed frames by
// hand: what a server does on the wire, byte for byte.
type deflateServer struct {
	ln      net.Listener
	answer  func(offer httphead.Option) httphead.Option // nil: decline
	script  func(conn net.Conn)
	offers  chan string // each offer, as the client wrote it
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
	closing bool
}

func newDeflateServer(t *testing.T, answer func(httphead.Option) httphead.Option, script func(net.Conn)) *deflateServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &deflateServer{ln: ln, answer: answer, script: script, offers: make(chan string, 16)}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *deflateServer) url() string { return "ws://" + s.ln.Addr().String() + "/" }

func (s *deflateServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.conns = append(s.conns, conn)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conn.Close()
			u := ws.Upgrader{
				Negotiate: func(opt httphead.Option) (httphead.Option, error) {
					s.offers <- optionText(opt)
					if s.answer == nil || string(opt.Name) != "permessage-deflate" {
						return httphead.Option{}, nil
					}
					return s.answer(opt), nil
				},
			}
			if _, err := u.Upgrade(conn); err != nil {
				return
			}
			s.script(conn)
		}()
	}
}

func (s *deflateServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	s.closing = true
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// optionText is an offered extension as name;param;param=value.
func optionText(opt httphead.Option) string {
	out := string(opt.Name)
	opt.Parameters.ForEach(func(k, v []byte) bool {
		out += ";" + string(k)
		if len(v) > 0 {
			out += "=" + string(v)
		}
		return true
	})
	return out
}

// option builds a permessage-deflate answer with the given parameters.
func option(params ...string) func(httphead.Option) httphead.Option {
	return func(httphead.Option) httphead.Option {
		o := httphead.Option{Name: []byte("permessage-deflate")}
		for _, p := range params {
			k, v, _ := strings.Cut(p, "=")
			o.Parameters.Set([]byte(k), []byte(v))
		}
		return o
	}
}

// serverDeflater compresses like a server with (takeover) or without
// context takeover.
type serverDeflater struct {
	buf      bytes.Buffer
	w        *flate.Writer
	takeover bool
}

func newServerDeflater(takeover bool) *serverDeflater {
	d := &serverDeflater{takeover: takeover}
	d.w, _ = flate.NewWriter(&d.buf, flate.DefaultCompression)
	return d
}

// frame is msg compressed as one text frame with RSV1.
func (d *serverDeflater) frame(msg []byte) []byte {
	d.buf.Reset()
	if !d.takeover {
		d.w.Reset(&d.buf)
	}
	_, _ = d.w.Write(msg)
	_ = d.w.Flush()
	payload := bytes.Clone(d.buf.Bytes()[:d.buf.Len()-4])
	var out bytes.Buffer
	_ = ws.WriteHeader(&out, ws.Header{Fin: true, Rsv: ws.Rsv(true, false, false), OpCode: ws.OpText, Length: int64(len(payload))})
	out.Write(payload)
	return out.Bytes()
}

// readClientFrame reads one frame tether wrote, unmasked.
func readClientFrame(r io.Reader) (ws.Header, []byte, error) {
	h, err := ws.ReadHeader(r)
	if err != nil {
		return h, nil, err
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		return h, nil, err
	}
	ws.Cipher(p, h.Mask, 0)
	return h, p, nil
}

// holdRaw keeps a raw server connection open, discarding what tether
// sends, until tether closes: its close frame is answered, as a server
// does, so the Client's Close does not wait out its close timeout.
func holdRaw(conn net.Conn) {
	for {
		h, p, err := readClientFrame(conn)
		if err != nil {
			return
		}
		if h.OpCode == ws.OpClose {
			_ = ws.WriteFrame(conn, ws.NewCloseFrame(p))
			return
		}
	}
}

// zeroBomb is a permessage-deflate payload of mib MiB of zeros: after a
// flush the compressor's state repeats, so one compressed MiB is repeated
// rather than compressing them all.
func zeroBomb(mib int) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	block := func() []byte {
		start := buf.Len()
		_, _ = w.Write(zeros)
		_ = w.Flush()
		return bytes.Clone(buf.Bytes()[start:])
	}
	first, second := block(), block()
	out := append(first, bytes.Repeat(second, mib-1)...)
	return out[:len(out)-4]
}

func inflateAll(p []byte) ([]byte, error) {
	return io.ReadAll(flate.NewReader(io.MultiReader(bytes.NewReader(p), bytes.NewReader([]byte{0, 0, 0xff, 0xff, 1, 0, 0, 0xff, 0xff}))))
}

// TestCompressionNegotiated: tether offers permessage-deflate with
// client_no_context_takeover and a value-less client_max_window_bits;
// when the server accepts, its compressed messages reach the Handler
// inflated, with or without its context takeover, and tether's large
// messages go out compressed unless the server limited tether's window
// below the 15 bits compress/flate uses.
func TestCompressionNegotiated(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answer     []string
		takeover   bool
		compressed bool // tether's large message goes out compressed
	}{
		{"context takeover", nil, true, true},
		{"server_no_context_takeover", []string{"server_no_context_takeover"}, false, true},
		{"client_max_window_bits=15", []string{"client_max_window_bits=15"}, true, true},
		{"client_max_window_bits=10", []string{"client_max_window_bits=10"}, true, false},
		{"server_max_window_bits=10", []string{"server_max_window_bits=10"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			feed := make([][]byte, 30)
			for i := range feed {
				feed[i] = fmt.Appendf(nil, `{"channel":"prices","symbol":"EURUSD","seq":%d,"bid":1.0842,"ask":1.0844}`, i)
			}
			big := bytes.Repeat([]byte(`{"op":"subscribe","channel":"prices"}`), 40)
			got := make(chan ws.Header, 1)
			srv := newDeflateServer(t, option(tc.answer...), func(conn net.Conn) {
				d := newServerDeflater(tc.takeover)
				for _, m := range feed {
					if _, err := conn.Write(d.frame(m)); err != nil {
						return
					}
				}
				h, p, err := readClientFrame(conn)
				if err != nil {
					return
				}
				if h.Rsv != 0 {
					if p, err = inflateAll(p); err != nil {
						t.Errorf("tether's compressed message does not inflate: %v", err)
					}
				}
				if !bytes.Equal(p, big) {
					t.Errorf("tether's message arrived as %.60q, want the message", p)
				}
				got <- h
				holdRaw(conn)
			})
			h := newHandler()
			opts := testOptions(t, srv.url(), h)
			c := startClient(t, opts)
			if first := recv(t, c.First(), "first dial"); first.Err != nil {
				t.Fatal(first.Err)
			}
			offer := recv(t, srv.offers, "the offer")
			if offer != "permessage-deflate;client_no_context_takeover;client_max_window_bits" {
				t.Errorf("offer %q", offer)
			}
			var conn *upstream.Conn
			for i, want := range feed {
				m := h.nextMessage(t)
				if m.data != string(want) {
					t.Fatalf("message %d: %q, want %q", i, m.data, want)
				}
				conn = m.conn
			}
			if !conn.Compressed() {
				t.Error("Conn.Compressed() = false, want true")
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := conn.SendText(ctx, big); err != nil {
				t.Fatal(err)
			}
			if hdr := recv(t, got, "tether's message"); (hdr.Rsv != 0) != tc.compressed {
				t.Errorf("tether's message RSV %03b, want compressed %v", hdr.Rsv, tc.compressed)
			}
		})
	}
}

// TestCompressionOffAndDeclined: TETHER_UPSTREAM_COMPRESSION=off offers
// nothing; a server that declines leaves messages plain.
func TestCompressionOffAndDeclined(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  upstream.Compression
		offer bool
	}{
		{"off", upstream.CompressionOff, false},
		{"declined", upstream.CompressionAuto, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newDeflateServer(t, nil, func(conn net.Conn) {
				_ = ws.WriteFrame(conn, ws.NewTextFrame([]byte("plain")))
				holdRaw(conn)
			})
			h := newHandler()
			opts := testOptions(t, srv.url(), h)
			opts.Compression = tc.mode
			startClient(t, opts)
			m := h.nextMessage(t)
			if m.data != "plain" || m.conn.Compressed() {
				t.Fatalf("message %q, compressed %v; want plain", m.data, m.conn.Compressed())
			}
			_, offered := pending(srv.offers)
			if offered != tc.offer {
				t.Errorf("offered permessage-deflate: %v, want %v", offered, tc.offer)
			}
		})
	}
}

// TestCompressionBomb: a compressed message that inflates past
// MaxMessageBytes ends the connection as an oversized one does: close
// 1009 naming the limit, which the default policy passes to the app.
func TestCompressionBomb(t *testing.T) {
	const limit = 64 << 10
	payload := zeroBomb(16) // 16 MiB of zeros in 16 KB
	closed := make(chan ws.StatusCode, 1)
	srv := newDeflateServer(t, option(), func(conn net.Conn) {
		_ = ws.WriteHeader(conn, ws.Header{Fin: true, Rsv: ws.Rsv(true, false, false), OpCode: ws.OpBinary, Length: int64(len(payload))})
		_, _ = conn.Write(payload)
		for {
			h, p, err := readClientFrame(conn)
			if err != nil {
				return
			}
			if h.OpCode == ws.OpClose {
				code, _ := ws.ParseCloseFrameData(p)
				closed <- code
				return
			}
		}
	})
	h := newHandler()
	opts := testOptions(t, srv.url(), h)
	opts.MaxMessageBytes = limit
	c := startClient(t, opts)
	if code := recv(t, closed, "tether's close frame"); code != ws.StatusMessageTooBig {
		t.Fatalf("tether closed with %d, want 1009", code)
	}
	lost := h.nextLost(t)
	var ce *upstream.CloseError
	if !errors.As(lost.err, &ce) || ce.Code != 1009 || !strings.Contains(ce.Reason, "TETHER_MAX_MESSAGE_BYTES") {
		t.Fatalf("Lost(%v), want close 1009 naming TETHER_MAX_MESSAGE_BYTES", lost.err)
	}
	waitClosed(t, c.Done(), "Client stop: 1009 is permanent by default")
	if m, ok := pending(h.messages); ok {
		t.Errorf("the Handler got a message of %d bytes from the bomb", len(m.data))
	}
}

// TestCompressionBadAnswer: an acceptance that breaks RFC 7692 fails the
// connection (§5) with an error that says so.
func TestCompressionBadAnswer(t *testing.T) {
	for _, answer := range [][]string{
		{"client_max_window_bits"},    // no value: offers only
		{"server_max_window_bits=16"}, // out of range
		{"mystery_parameter"},         // not in the extension
	} {
		t.Run(strings.Join(answer, ";"), func(t *testing.T) {
			srv := newDeflateServer(t, option(answer...), func(net.Conn) {})
			opts := testOptions(t, srv.url(), newHandler())
			c := startClient(t, opts)
			first := recv(t, c.First(), "first dial")
			if first.Err == nil || !strings.Contains(first.Err.Error(), "permessage-deflate") {
				t.Fatalf("first dial = %+v, want a failure naming permessage-deflate", first)
			}
		})
	}
}
