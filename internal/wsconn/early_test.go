package wsconn_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// Bytes already buffered in br when New is called are frames the peer sent; they
// are read before anything from the socket, including a frame split between the
// two.
func TestEarlyFramesInReader(t *testing.T) {
	split := encode(t, ws.NewTextFrame([]byte("split between buffer and socket")))
	tests := []struct {
		name     string
		buffered []byte
		fromConn []byte
		want     []string
	}{
		{
			name: "whole frames buffered",
			buffered: encode(t,
				ws.NewTextFrame([]byte("early one")),
				ws.NewBinaryFrame([]byte("early two"))),
			fromConn: encode(t, ws.NewTextFrame([]byte("from the socket"))),
			want:     []string{"early one", "early two", "from the socket"},
		},
		{
			name:     "frame split",
			buffered: split[:7],
			fromConn: split[7:],
			want:     []string{"split between buffer and socket"},
		},
		{
			name:     "header split",
			buffered: split[:1],
			fromConn: split[1:],
			want:     []string{"split between buffer and socket"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newRawPair(t)
			br := bufio.NewReader(bytes.NewReader(tt.buffered))
			if _, err := br.Peek(len(tt.buffered)); err != nil {
				t.Fatalf("fill buffer: %v", err)
			}
			cli := wrap(t, p.client, br, wsconn.Options{Client: true})
			if _, err := p.server.Write(tt.fromConn); err != nil {
				t.Fatalf("write: %v", err)
			}
			for _, want := range tt.want {
				_, got := mustRead(t, cli)
				if string(got) != want {
					t.Fatalf("got %q, want %q", got, want)
				}
			}
		})
	}
}

// The classic gobwas bug end to end: a server that pushes a frame in the same
// write as its 101 response. ws.Dialer leaves the frame in the returned
// bufio.Reader; New must read it from there.
func TestFrameWithHandshakeResponse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	pushed := []byte("pushed with the 101")
	srvErr := make(chan error, 1)
	srvConn := make(chan net.Conn, 1)
	go func() { srvErr <- pushingServer(ln, pushed, srvConn) }()

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, br, _, err := ws.Dialer{}.Dial(ctx, "ws://"+ln.Addr().String()+"/")
	_ = ln.Close() // unblocks Accept if Dial never connected
	if err != nil {
		t.Fatalf("dial: %v (server: %v)", err, <-srvErr)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := <-srvErr; err != nil {
		t.Fatalf("server: %v", err)
	}
	sc := <-srvConn
	t.Cleanup(func() { _ = sc.Close() })
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	if br == nil {
		t.Fatal("Dial returned no buffered bytes: the response and the frame arrived apart, so this run does not exercise the early-frame path")
	}
	cli := wrap(t, conn, br, wsconn.Options{Client: true})
	op, got := mustRead(t, cli)
	if op != ws.OpText || !bytes.Equal(got, pushed) {
		t.Fatalf("first message %v %q, want text %q", op, got, pushed)
	}
	// And the socket still works after the early bytes.
	if _, err := sc.Write(encode(t, ws.NewTextFrame([]byte("next")))); err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, got := mustRead(t, cli); string(got) != "next" {
		t.Fatalf("second message %q, want %q", got, "next")
	}
}

// pushingServer accepts one connection and writes a hand-made 101 response and a
// text frame in a single Write.
func pushingServer(ln net.Listener, payload []byte, out chan<- net.Conn) error {
	conn, err := ln.Accept()
	if err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	if err := push(conn, payload); err != nil {
		_ = conn.Close()
		return err
	}
	out <- conn
	return nil
}

func push(conn net.Conn, payload []byte) error {
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 101 Switching Protocols\r\n"+
		"Upgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Accept: %s\r\n\r\n", acceptKey(req.Header.Get("Sec-WebSocket-Key")))
	if err := ws.WriteFrame(&b, ws.NewTextFrame(payload)); err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	if _, err := conn.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

// acceptKey is Sec-WebSocket-Accept for key (RFC 6455 §4.2.2).
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}
