package wsconn_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// Sizes around the three header length encodings (RFC 6455 §5.2) and above the
// reader's 64 KiB allocation chunk.
var messageSizes = []int{0, 1, 125, 126, 65535, 65536, 200 << 10}

func TestMessagesBothDirections(t *testing.T) {
	srv, cli := bothSides(t, wsconn.Options{}, wsconn.Options{})
	for _, op := range []ws.OpCode{ws.OpText, ws.OpBinary} {
		for _, n := range messageSizes {
			t.Run(fmt.Sprintf("op%d/%dB", op, n), func(t *testing.T) {
				want := pattern(n, n)
				mustSend(t, srv, op, want)
				checkMessage(t, cli, op, want)
				mustSend(t, cli, op, want)
				checkMessage(t, srv, op, want)
			})
		}
	}
}

func checkMessage(t *testing.T, c *wsconn.Conn, wantOp ws.OpCode, want []byte) {
	t.Helper()
	op, p := mustRead(t, c)
	if op != wantOp || !bytes.Equal(p, want) {
		t.Fatalf("got op %v, %d bytes; want op %v, %d bytes (equal=%v)", op, len(p), wantOp, len(want), bytes.Equal(p, want))
	}
}

// Send copies its argument: the caller may reuse the slice at once.
func TestSendCopiesPayload(t *testing.T) {
	srv, cli := bothSides(t, wsconn.Options{}, wsconn.Options{})
	buf := []byte("first")
	mustSend(t, srv, ws.OpText, buf)
	copy(buf, "XXXXX")
	mustSend(t, srv, ws.OpText, buf)
	checkMessage(t, cli, ws.OpText, []byte("first"))
	checkMessage(t, cli, ws.OpText, []byte("XXXXX"))
}

// The server side writes unmasked frames that a stock gobwas client accepts, and
// reads what wsutil.WriteClientMessage writes.
func TestInteropServerSide(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{})
	for _, op := range []ws.OpCode{ws.OpText, ws.OpBinary} {
		want := pattern(int(op), 3000)
		if err := wsutil.WriteClientMessage(raw, op, want); err != nil {
			t.Fatalf("WriteClientMessage: %v", err)
		}
		checkMessage(t, srv, op, want)

		mustSend(t, srv, op, want)
		got, gotOp, err := wsutil.ReadServerData(raw)
		if err != nil || gotOp != op || !bytes.Equal(got, want) {
			t.Fatalf("ReadServerData: op %v, %d bytes, err %v", gotOp, len(got), err)
		}
	}
}

// The client side writes masked frames that a stock gobwas server accepts, and
// reads what wsutil.WriteServerMessage writes.
func TestInteropClientSide(t *testing.T) {
	cli, raw := clientSide(t, wsconn.Options{})
	for _, op := range []ws.OpCode{ws.OpText, ws.OpBinary} {
		want := pattern(int(op), 3000)
		if err := wsutil.WriteServerMessage(raw, op, want); err != nil {
			t.Fatalf("WriteServerMessage: %v", err)
		}
		checkMessage(t, cli, op, want)

		mustSend(t, cli, op, want)
		got, gotOp, err := wsutil.ReadClientData(raw)
		if err != nil || gotOp != op || !bytes.Equal(got, want) {
			t.Fatalf("ReadClientData: op %v, %d bytes, err %v", gotOp, len(got), err)
		}
	}
}

// Masking on the wire, checked frame by frame rather than through a library that
// might tolerate either: client frames masked with a fresh key, server frames not.
func TestMaskingOnTheWire(t *testing.T) {
	p := newRawPair(t)
	srv := wrap(t, p.server, nil, wsconn.Options{})
	cli := wrap(t, p.client, p.clientBR, wsconn.Options{Client: true})
	_ = srv
	payload := []byte("same payload twice")
	mustSend(t, cli, ws.OpText, payload)
	mustSend(t, cli, ws.OpText, payload)
	// Read the client's frames straight off the server's socket (srv is not
	// reading; its own reader would consume them).
	f1 := mustReadFrame(t, p.server, true)
	f2 := mustReadFrame(t, p.server, true)
	if !bytes.Equal(f1.payload, payload) || !bytes.Equal(f2.payload, payload) {
		t.Fatalf("unmasked payloads %q, %q; want %q", f1.payload, f2.payload, payload)
	}
	if f1.hdr.Mask == f2.hdr.Mask {
		t.Fatalf("two frames share the masking key %x (RFC 6455 §5.3 wants a fresh one)", f1.hdr.Mask)
	}
}

func TestUnmaskedClientFrameRejected(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{})
	writeRaw(t, raw, ws.NewTextFrame([]byte("not masked")))
	_, _, err := srv.ReadMessage()
	asProtocolError(t, err, ws.StatusProtocolError)
	expectClose(t, raw, false, ws.StatusProtocolError, nil)
}

func TestMaskedServerFrameRejected(t *testing.T) {
	cli, raw := clientSide(t, wsconn.Options{})
	writeRaw(t, raw, clientFrame(ws.OpText, true, []byte("masked")))
	_, _, err := cli.ReadMessage()
	asProtocolError(t, err, ws.StatusProtocolError)
	expectClose(t, raw, true, ws.StatusProtocolError, nil)
}

func TestFragmentedMessageReassembled(t *testing.T) {
	tests := []struct {
		name  string
		op    ws.OpCode
		parts []string
	}{
		{"text", ws.OpText, []string{"hel", "lo ", "world"}},
		// A rune split across frames is valid: UTF-8 is checked on the whole message.
		{"text rune split", ws.OpText, []string{"caf\xc3", "\xa9!"}},
		{"binary", ws.OpBinary, []string{"\x00\x01", "", "\xff"}},
		{"empty fragments", ws.OpText, []string{"", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, raw := serverSide(t, wsconn.Options{})
			var frames []ws.Frame
			for i, part := range tt.parts {
				op := ws.OpContinuation
				if i == 0 {
					op = tt.op
				}
				frames = append(frames, clientFrame(op, i == len(tt.parts)-1, []byte(part)))
			}
			writeRaw(t, raw, frames...)
			want := []byte(joinParts(tt.parts))
			checkMessage(t, srv, tt.op, want)
		})
	}
}

func joinParts(parts []string) string {
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString(p)
	}
	return b.String()
}

// A ping between fragments is answered at once and does not disturb the message
// being reassembled (RFC 6455 §5.4: control frames may be injected mid-message).
func TestPingBetweenFragments(t *testing.T) {
	srv, raw := serverSide(t, wsconn.Options{})
	writeRaw(t, raw,
		clientFrame(ws.OpText, false, []byte("hello ")),
		clientFrame(ws.OpPing, true, []byte("mid")),
		clientFrame(ws.OpContinuation, false, []byte("fragmented ")),
		clientFrame(ws.OpContinuation, true, []byte("world")),
	)
	checkMessage(t, srv, ws.OpText, []byte("hello fragmented world"))
	pong := mustReadFrame(t, raw, false)
	if pong.hdr.OpCode != ws.OpPong || string(pong.payload) != "mid" {
		t.Fatalf("got %v %q, want pong %q", pong.hdr.OpCode, pong.payload, "mid")
	}
}

func TestPingAnsweredWithSamePayload(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"short", []byte("are you there")},
		{"max", pattern(7, 125)},
	}
	for _, tt := range tests {
		t.Run("server/"+tt.name, func(t *testing.T) {
			srv, raw := serverSide(t, wsconn.Options{})
			writeRaw(t, raw, clientFrame(ws.OpPing, true, tt.payload), clientFrame(ws.OpText, true, []byte("after")))
			checkMessage(t, srv, ws.OpText, []byte("after"))
			checkPong(t, raw, false, tt.payload)
		})
		t.Run("client/"+tt.name, func(t *testing.T) {
			cli, raw := clientSide(t, wsconn.Options{})
			writeRaw(t, raw, ws.NewPingFrame(tt.payload), ws.NewTextFrame([]byte("after")))
			checkMessage(t, cli, ws.OpText, []byte("after"))
			checkPong(t, raw, true, tt.payload)
		})
	}
}

func checkPong(t *testing.T, raw interface{ Read([]byte) (int, error) }, masked bool, want []byte) {
	t.Helper()
	f := mustReadFrame(t, raw, masked)
	if f.hdr.OpCode != ws.OpPong || !bytes.Equal(f.payload, want) {
		t.Fatalf("got %v %q, want pong %q", f.hdr.OpCode, f.payload, want)
	}
}

func TestPongCallback(t *testing.T) {
	var pongs atomic.Int32
	srv, raw := serverSide(t, wsconn.Options{Pong: func() { pongs.Add(1) }})
	writeRaw(t, raw,
		clientFrame(ws.OpPong, true, []byte("1")),
		clientFrame(ws.OpText, false, []byte("a")),
		clientFrame(ws.OpPong, true, nil), // mid-message, unsolicited: still counted
		clientFrame(ws.OpContinuation, true, []byte("b")),
	)
	checkMessage(t, srv, ws.OpText, []byte("ab"))
	if got := pongs.Load(); got != 2 {
		t.Fatalf("Pong called %d times, want 2", got)
	}
}

// Ping sends a ping the peer can answer; server pings are unmasked, client pings
// masked, and payloads over the control-frame limit are cut to 125 bytes.
func TestPingSent(t *testing.T) {
	srv, rawClient := serverSide(t, wsconn.Options{})
	if err := srv.Ping([]byte("hb")); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	f := mustReadFrame(t, rawClient, false)
	if f.hdr.OpCode != ws.OpPing || string(f.payload) != "hb" {
		t.Fatalf("got %v %q, want ping %q", f.hdr.OpCode, f.payload, "hb")
	}

	cli, rawServer := clientSide(t, wsconn.Options{})
	long := pattern(3, 300)
	if err := cli.Ping(long); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	f = mustReadFrame(t, rawServer, true)
	if f.hdr.OpCode != ws.OpPing || !bytes.Equal(f.payload, long[:125]) {
		t.Fatalf("got %v with %d bytes, want ping with the first 125", f.hdr.OpCode, len(f.payload))
	}
}

// The heartbeat round trip between two wsconns: one side pings, the other's reader
// answers, the first side's Pong callback fires.
func TestPingPongBetweenConns(t *testing.T) {
	gotPong := make(chan struct{}, 1)
	opts := wsconn.Options{Pong: func() {
		select {
		case gotPong <- struct{}{}:
		default:
		}
	}}
	srv, cli := bothSides(t, wsconn.Options{}, opts)
	readLoop(t, srv)
	readLoop(t, cli)
	if err := cli.Ping([]byte("beat")); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	select {
	case <-gotPong:
	case <-time.After(testTimeout):
		t.Fatal("no pong")
	}
}

// LastRead must move to the time a frame arrived, whatever its kind: it is what
// the heartbeat measures silence with. Each case takes sent just before the frame
// goes out; a LastRead still at New's time would be before it.
func TestLastReadAdvancesOnAnyFrame(t *testing.T) {
	t.Run("data", func(t *testing.T) {
		srv, raw := serverSide(t, wsconn.Options{})
		sent := time.Now()
		writeRaw(t, raw, clientFrame(ws.OpText, true, []byte("x")))
		mustRead(t, srv)
		if got := srv.LastRead(); got.Before(sent) {
			t.Fatalf("LastRead %v is before the frame was sent at %v", got, sent)
		}
	})
	t.Run("pong", func(t *testing.T) {
		// A pong is read without ReadMessage returning: the callback tells us it
		// was read, and by then LastRead has moved.
		seen := make(chan time.Time, 1)
		var srv *wsconn.Conn
		srv, raw := serverSide(t, wsconn.Options{Pong: func() { seen <- srv.LastRead() }})
		readLoop(t, srv)
		sent := time.Now()
		writeRaw(t, raw, clientFrame(ws.OpPong, true, nil))
		select {
		case got := <-seen:
			if got.Before(sent) {
				t.Fatalf("LastRead %v is before the pong was sent at %v", got, sent)
			}
		case <-time.After(testTimeout):
			t.Fatal("pong not read")
		}
	})
}

// Several goroutines Send at once in both directions while readers read: every
// message arrives whole, and each sender's messages in its order.
func TestConcurrentSenders(t *testing.T) {
	const senders, perSender = 8, 200
	srv, cli := bothSides(t, wsconn.Options{QueueBytes: 16 << 10}, wsconn.Options{QueueBytes: 16 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, dir := range []struct {
		name     string
		from, to *wsconn.Conn
	}{{"server to client", srv, cli}, {"client to server", cli, srv}} {
		t.Run(dir.name, func(t *testing.T) {
			errs := make(chan error, senders+1)
			var wg sync.WaitGroup
			for id := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- sendNumbered(ctx, dir.from, id, perSender)
				}()
			}
			// The heartbeat pings from yet another goroutine meanwhile.
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perSender {
					if err := dir.from.Ping([]byte("hb")); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
			readErr := checkNumbered(dir.to, senders, perSender)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("sender: %v", err)
				}
			}
			if readErr != nil {
				t.Fatal(readErr)
			}
		})
	}
}

// sendNumbered sends n messages tagged (id, seq) with a body derived from both.
func sendNumbered(ctx context.Context, c *wsconn.Conn, id, n int) error {
	for seq := range n {
		msg := binary.BigEndian.AppendUint32(nil, uint32(id))
		msg = binary.BigEndian.AppendUint32(msg, uint32(seq))
		msg = append(msg, pattern(id*n+seq, 1+(seq*37)%3000)...)
		if err := c.Send(ctx, ws.OpBinary, msg); err != nil {
			return fmt.Errorf("sender %d message %d: %w", id, seq, err)
		}
	}
	return nil
}

func checkNumbered(c *wsconn.Conn, senders, perSender int) error {
	next := make([]int, senders)
	for range senders * perSender {
		op, p, err := c.ReadMessage()
		if err != nil {
			return fmt.Errorf("ReadMessage: %w", err)
		}
		if op != ws.OpBinary || len(p) < 8 {
			return fmt.Errorf("got op %v with %d bytes", op, len(p))
		}
		id, seq := int(binary.BigEndian.Uint32(p)), int(binary.BigEndian.Uint32(p[4:]))
		if id >= senders || seq != next[id] {
			return fmt.Errorf("got sender %d message %d, want message %d", id, seq, next[id%senders])
		}
		if want := pattern(id*perSender+seq, 1+(seq*37)%3000); !bytes.Equal(p[8:], want) {
			return fmt.Errorf("sender %d message %d torn: %d bytes, want %d", id, seq, len(p)-8, len(want))
		}
		next[id]++
	}
	return nil
}
