package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

const (
	// subMessage is what the client sends once, right after connecting. The
	// id is a request id: the feed's answer carries it back.
	subMessage = `{"t":"sub","channel":"prices","id":1}`
	// clientDialTimeout covers tether's TETHER_ACCEPT_WAIT: tether dials the
	// upstream before it answers the client's handshake.
	clientDialTimeout = 5 * time.Second
	// clientWriteTimeout bounds one frame write to tether.
	clientWriteTimeout = 2 * time.Second
	// clientCloseWait is how long Close waits for tether's close echo.
	clientCloseWait = 3 * time.Second
	// clientMaxMessage bounds one message: the feed's are tiny.
	clientMaxMessage = 1 << 20
)

// clientStats is what the client saw.
type clientStats struct {
	events, gaps, missed, duplicates, late int64
	snapshots                              int64 // the stream restarted from a snapshot
	notices, announced                     int64 // gap notices, and the events they said were lost
	welcomes, acks, other                  int64
	closes                                 int    // socket closed by someone else
	closedBy                               string // why, for the first such close
}

// client is the naive app: it connects to tether once, sends one
// subscription, then only reads. It never reconnects: if its socket closes,
// it is done, and the demo says so. It tracks event numbers the way a
// careful app would, to show what each outage cost.
//
// One goroutine reads (and answers pings); writes are serialised by wmu.
// Stats and Close are safe for concurrent use.
type client struct {
	conn    net.Conn
	rd      *wsutil.Reader
	narr    *narrator
	wmu     sync.Mutex
	closing atomic.Bool   // Close has started: the socket's end is ours
	done    chan struct{} // closed when the reader has returned
	once    sync.Once

	mu    sync.Mutex
	track tracker
	stats clientStats // welcomes, acks, other, closes, closedBy
}

// dialClient connects to tether at url, sends the subscription and starts
// reading.
func dialClient(ctx context.Context, url string, n *narrator) (*client, error) {
	conn, br, _, err := ws.Dialer{Timeout: clientDialTimeout}.Dial(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("client: connect to tether: %w", err)
	}
	var src io.Reader = conn
	if br != nil {
		// Frames tether sent right behind its 101 answer sit in br.
		src = br
	}
	c := &client{
		conn: conn,
		narr: n,
		done: make(chan struct{}),
		rd: &wsutil.Reader{
			Source:         src,
			State:          ws.StateClientSide,
			MaxFrameSize:   clientMaxMessage,
			MaxMessageSize: clientMaxMessage,
		},
	}
	c.rd.OnIntermediate = c.intermediate
	if err := c.write(ws.NewTextFrame([]byte(subMessage))); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("client: send subscription: %w", err)
	}
	go c.readLoop()
	return c, nil
}

// Done is closed once the client's socket has ended.
func (c *client) Done() <-chan struct{} { return c.done }

// Stats returns a snapshot of what the client saw.
func (c *client) Stats() clientStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	t := &c.track
	s.events, s.gaps, s.missed, s.duplicates, s.late = t.events, t.gaps, t.missed, t.duplicates, t.late
	s.snapshots, s.announced = t.snapshots, t.announced
	return s
}

// Close closes the socket with 1000, waits briefly for tether's echo, and
// waits for the reader. It is idempotent.
func (c *client) Close() {
	c.once.Do(func() {
		c.closing.Store(true)
		// A failed write means the socket is already gone; the reader ends.
		_ = c.write(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "")))
		t := time.NewTimer(clientCloseWait)
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
		_ = c.conn.Close()
		<-c.done
	})
}

// write sends one frame, masked as RFC 6455 section 5.3 requires of clients.
func (c *client) write(f ws.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
	return ws.WriteFrame(c.conn, ws.MaskFrameInPlace(f))
}

// readLoop is the client's only reader.
func (c *client) readLoop() {
	defer close(c.done)
	err := c.readFrames()
	if !c.closing.Load() {
		c.lost(err)
	}
	_ = c.conn.Close()
}

// readFrames reads until the socket ends; it returns *closeFrame when tether
// sent a close frame.
func (c *client) readFrames() error {
	var buf bytes.Buffer
	for {
		h, err := c.rd.NextFrame()
		if err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(c.rd); err != nil {
			return err
		}
		if h.OpCode.IsControl() {
			if err := c.control(h.OpCode, buf.Bytes()); err != nil {
				return err
			}
			continue
		}
		c.message(buf.Bytes())
	}
}

// intermediate handles a control frame between the fragments of a message.
func (c *client) intermediate(h ws.Header, r io.Reader) error {
	p, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return c.control(h.OpCode, p)
}

// control answers a ping and reports a close frame.
func (c *client) control(op ws.OpCode, p []byte) error {
	switch op {
	case ws.OpPing:
		// A failed pong surfaces as a read error.
		_ = c.write(ws.NewPongFrame(bytes.Clone(p)))
	case ws.OpClose:
		code, reason := ws.ParseCloseFrameData(p)
		return &closeFrame{code: code, reason: reason}
	}
	return nil
}

// closeFrame is the close frame tether sent.
type closeFrame struct {
	code   ws.StatusCode
	reason string
}

func (e *closeFrame) Error() string {
	if e.reason == "" {
		return fmt.Sprintf("tether closed the socket with %d", e.code)
	}
	return fmt.Sprintf("tether closed the socket with %d %q", e.code, e.reason)
}

// lost records a socket that ended without the client asking: for an app
// behind tether, that must never happen.
func (c *client) lost(err error) {
	var cf *closeFrame
	if errors.As(err, &cf) {
		// Echo the close as RFC 6455 section 5.5.1 asks, then hang up.
		_ = c.write(ws.NewCloseFrame(ws.NewCloseFrameBody(cf.code, "")))
	} else {
		err = fmt.Errorf("the socket failed: %w", err)
	}
	c.mu.Lock()
	c.stats.closes++
	if c.stats.closedBy == "" {
		c.stats.closedBy = err.Error()
	}
	c.mu.Unlock()
	c.narr.say(srcClient, "!!! %s. This naive client never reconnects; behind tether it should never have to. That is a tether bug.", err)
}

// feedMessage is the union of the feed's messages the client reads.
type feedMessage struct {
	T    string `json:"t"`
	Seq  int64  `json:"seq"`
	At   int64  `json:"at"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
}

// message accounts for one message from tether.
func (c *client) message(data []byte) {
	var m feedMessage
	_ = json.Unmarshal(data, &m) // anything unparsable counts as "other"
	c.mu.Lock()
	var o observation
	switch m.T {
	case "event":
		o = c.track.observe(m.Seq)
	case "snapshot":
		o = c.track.resync(m.At)
	case "gap":
		o = c.track.announce(m.From, m.To)
		c.stats.notices++
	case "welcome":
		c.stats.welcomes++
	case "subscribed", "ack":
		c.stats.acks++
	default:
		c.stats.other++
	}
	c.mu.Unlock()
	c.narrate(m, o)
}

// narrate tells what a message revealed, when it is news. Behind tether a
// gap, a duplicate or a late event is a bug: tether fills gaps, drops
// duplicates and holds what comes early. A snapshot and an announced gap
// are the feed's and tether's honest answers when history ran out.
func (c *client) narrate(m feedMessage, o observation) {
	switch {
	case m.T == "snapshot" && o.gap.from > 0:
		c.narr.say(srcClient, "snapshot at event %d: the feed could no longer replay events %d–%d, "+
			"so the client takes its state from the snapshot and reads on from %d", m.At, o.gap.from, o.gap.to, m.At+1)
	case m.T == "snapshot":
		c.narr.say(srcClient, "snapshot at event %d: the client takes its state from it", m.At)
	case m.T == "gap":
		c.narr.say(srcClient, "tether says events %d–%d are lost for good (gap notice); the client reads on", m.From, m.To)
	case o.kind == seqGap:
		c.narr.say(srcClient, "!!! %s: %s missing without notice; tether should have filled it or said so",
			gapName(o.gap), plural(o.gap.len(), "event", "events"))
	case o.kind == seqDuplicate:
		c.narr.say(srcClient, "!!! duplicate: event %d arrived again (after %d)", m.Seq, o.last)
	case o.kind == seqLate:
		c.narr.say(srcClient, "!!! out of order: event %d arrived after %d", m.Seq, o.last)
	}
}

// gapName prints "gap 412–418" or "gap 412".
func gapName(g span) string {
	if g.from == g.to {
		return fmt.Sprintf("gap %d", g.from)
	}
	return fmt.Sprintf("gap %d–%d", g.from, g.to)
}
