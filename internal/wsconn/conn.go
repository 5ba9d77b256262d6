package wsconn

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/sendq"
)

// Options configures a Conn. The zero value of each field has a safe meaning.
type Options struct {
	// Client is true on the upstream side: frames tether writes are masked and
	// frames it reads must not be (RFC 6455 §5.1).
	Client bool
	// MaxMessageBytes bounds one reassembled message; a larger one closes the
	// connection with 1009. Zero means DefaultMaxMessageBytes: gobwas' own zero
	// means unlimited, which no peer should get.
	MaxMessageBytes int64
	// QueueBytes bounds the bytes Send may have queued before it blocks. Zero
	// means DefaultQueueBytes. One message larger than the bound is still accepted
	// when the queue is empty.
	QueueBytes int64
	// WriteTimeout bounds each flush to the socket by the writer goroutine
	// (an inline write never waits). Zero means no deadline: the owner
	// detects a stuck peer itself (heartbeat) and calls Abort.
	WriteTimeout time.Duration
	// CloseWait bounds how long Close waits for queued data to be written and for
	// the peer's close frame before it closes TCP. Zero means DefaultCloseWait.
	CloseWait time.Duration
	// Pong is called from the reader when a pong arrives (heartbeat bookkeeping).
	// It must not block.
	Pong func()
	// Deflate, when not nil, is the negotiated permessage-deflate: see
	// Deflate. Without it a frame with RSV1 set is a protocol error, and
	// the reader and writer cost nothing more than before the extension.
	Deflate *Deflate
	// Account, when not nil, is the memory budget's account of the
	// connection's session. The queued bytes count on it
	// (sendq.Options.Account): Send then also waits while the budget has no
	// room for the session, and what is still queued when the connection ends
	// is given back. So do, without ever waiting, the buffers the reader
	// borrows while it holds them (the read buffer, the buffer of a message
	// being reassembled or inflated, one that outgrew it by its size) and
	// what context takeover keeps (rbuf.go, holdings).
	Account *budget.Account
}

// Defaults for zero Options fields.
const (
	DefaultMaxMessageBytes = 16 << 20
	DefaultQueueBytes      = 16 << 20
	DefaultCloseWait       = 2 * time.Second
)

// Conn is one WebSocket connection. See the package documentation for its
// concurrency contract.
type Conn struct {
	nc   net.Conn
	br   reader // a sockReader, or a waitReader when that is not possible
	opts Options
	// held is what the reader holds, counted on Options.Account.
	held holdings

	// Reader state, touched only by the reading goroutine.
	msg     []byte
	msgBuf  *rbuf // msg's borrowed buffer; nil when msg outgrew it (or is nil)
	msgCost int64 // what msg's frames count against MaxMessageBytes: their payload, at least a byte each
	// asm is what the message being reassembled holds on Options.Account
	// beyond a borrowed buffer, given back once it is whole or the read
	// failed.
	asm     int64
	readErr error
	// ahead is the header of the next frame, of aheadN bytes, when that
	// frame sits whole and plain in the read buffer (readWhole); aheadN is 0
	// when unknown.
	ahead  ws.Header
	aheadN int
	// frame is the last message's one frame as it arrived, header
	// included, when readWhole returned it in place (Frame); nil
	// otherwise. A masked frame's payload is unmasked in place for the
	// caller while frameOpen is true, and masked again by Frame.
	frame     []byte
	frameHdr  int
	frameMask [4]byte
	frameOpen bool
	// hdr and ctl are buffers of the frame header and control payload
	// being read, after frameOpen so that the bytes fill the struct's
	// padding: at 632 bytes, a Conn and its 8-byte malloc header fit the
	// 640 size class.
	hdr [ws.MaxHeaderSize]byte
	ctl [125]byte
	// inflater holds permessage-deflate's reader state, from the first
	// compressed message on.
	inflater *inflater

	// lastRead is the monotonic time (nanoseconds since epoch) of the last frame
	// header read, for heartbeats.
	lastRead atomic.Int64

	// info reads the socket's TCP counters for WriteProgress, set up on its
	// first call (counters): the app side never calls it.
	info atomic.Pointer[tcpInfo]

	// Writer side. The writer is the caller that queued a burst's first
	// bytes, writing inline, and a goroutine only for what the socket did
	// not take at once (write.go), so an idle connection costs no
	// goroutine, and no stack, for its writer.
	//
	// done is closed when the writer has exited and TCP is closed (Done);
	// closeWake when the reader has seen the peer's close or Abort ran, for
	// the writer that waits for either after its close frame (finishClose).
	// Each is made on first use, under mu, and is closedChan once its event
	// happened: an idle connection needs neither, and the three channels
	// made with every connection were 336 bytes of it.
	done, closeWake chan struct{}
	closing         atomic.Bool // Close or Abort was called, or a close was echoed
	abortOnce       sync.Once

	// mu guards the queue: frames are encoded straight into it, and the
	// writer swaps it out whole, so a message costs one lock and one copy.
	// q counts the data bytes in segs against QueueBytes, under mu.
	mu         sync.Mutex
	q          sendq.Queue
	segs       []*sendq.Buf // data frames (and finally the close frame), in order
	ctrl       *sendq.Buf   // pings and pongs, written before queued data
	ctrlFrames int
	// ctrlUnwritten counts the bytes of control frames queued and not yet
	// written (Unwritten); the data bytes are q's.
	ctrlUnwritten atomic.Int64
	// ctrlDropped counts control frames not queued: the queue was full.
	ctrlDropped uint64
	writeErr    error
	// writing is true from the writer's start to its exit; aborted once
	// Abort has closed the socket. Whichever of the writer's exit and Abort
	// comes second closes done. woken: the queueing in this critical
	// section made its caller the writer (wakeWriter).
	writing, aborted, woken bool
	w                       *writer // the writer's own state (write.go), from the first writer on
}

// epoch anchors lastRead on the monotonic clock.
var epoch = time.Now()

func monotonic() int64 { return int64(time.Since(epoch)) }

// New wraps an established connection. br may hold bytes the peer sent together
// with its handshake response (gobwas returns them from Dial): they are read first.
// The writer goroutine runs only while something is queued; the caller must
// eventually call Close or Abort.
func New(nc net.Conn, br *bufio.Reader, opts Options) *Conn {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = DefaultQueueBytes
	}
	if opts.CloseWait <= 0 {
		opts.CloseWait = DefaultCloseWait
	}
	c := &Conn{nc: nc, opts: opts}
	// The close frame goes after data already queued, and a Send after it
	// fails with ErrClosed, as after Abort.
	c.q.Init(&c.mu, sendq.Options{Limit: opts.QueueBytes, Closed: ErrClosed, Wake: c.wakeWriter, Account: opts.Account})
	c.held.acct = opts.Account
	c.br = c.newReader(nc, br)
	c.lastRead.Store(monotonic())
	return c
}

// readBufferSize is the read buffer: a burst of small frames is read in few
// syscalls, and a payload at least this large is read straight into the
// message. It is borrowed only while bytes wait in it (rbuf.go).
const readBufferSize = 64 << 10

// reader is the connection's buffered reader. Every Read asks for bytes the
// caller cannot go on without (a header's next field, the rest of a
// payload), which is what lets a waitReader wait for them without a buffer.
type reader interface {
	io.Reader
	// buffered returns the bytes read and not consumed yet.
	buffered() []byte
	// consume drops n of the bytes buffered returned.
	consume(n int)
	// fill waits for bytes when nothing is buffered, and buffers what
	// arrived.
	fill() error
	// stop gives back the buffer, for a reader that will not read again.
	stop()
}

// newReader returns the connection's buffered reader: a sockReader where the
// socket's descriptor can be waited on, a waitReader otherwise (TLS, and off
// Unix).
func (c *Conn) newReader(nc net.Conn, br *bufio.Reader) reader {
	early := handshakeBytes(br)
	if s := newSockReader(c, nc, early); s != nil {
		return s
	}
	var src io.Reader = nc
	if len(early) > 0 {
		src = io.MultiReader(bytes.NewReader(early), nc)
	}
	return &waitReader{c: c, src: src}
}

// handshakeBytes returns what br already buffered: frames the peer sent right
// after its handshake response. Reading nc directly would lose them.
func handshakeBytes(br *bufio.Reader) []byte {
	if br == nil || br.Buffered() == 0 {
		return nil
	}
	early := make([]byte, br.Buffered())
	_, _ = io.ReadFull(br, early) // cannot fail: the bytes are buffered
	return early
}

// LastRead reports when bytes last arrived from the peer (a frame of any kind,
// or part of one).
func (c *Conn) LastRead() time.Time { return epoch.Add(time.Duration(c.lastRead.Load())) }

// Done is closed once the writer has exited and the socket is closed.
func (c *Conn) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return made(&c.done)
}

// closedChan is a closed channel: a closing signal whose event happened.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// made returns the closing signal *ch, made now if it was not; c.mu is
// held.
func made(ch *chan struct{}) chan struct{} {
	if *ch == nil {
		*ch = make(chan struct{})
	}
	return *ch
}

// signal closes the closing signal *ch, if made, and leaves it closedChan;
// a second call does nothing. c.mu is held.
func signal(ch *chan struct{}) {
	if *ch != nil && *ch != closedChan {
		close(*ch)
	}
	*ch = closedChan
}

// closeDone closes done: the connection has ended.
func (c *Conn) closeDone() {
	c.mu.Lock()
	signal(&c.done)
	c.mu.Unlock()
}

// wakeClose ends the close frame's wait (finishClose): the peer's close
// arrived, or Abort ran.
func (c *Conn) wakeClose() {
	c.mu.Lock()
	signal(&c.closeWake)
	c.mu.Unlock()
}

// closeWoken is what finishClose waits on (wakeClose).
func (c *Conn) closeWoken() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return made(&c.closeWake)
}

// counters returns the socket's TCP counters reader, set up on the first
// call.
func (c *Conn) counters() *tcpInfo {
	if p := c.info.Load(); p != nil {
		return p
	}
	p := newTCPInfo(c.nc) // a racing caller's is the same
	c.info.CompareAndSwap(nil, &p)
	return c.info.Load()
}

// LocalAddr and RemoteAddr expose the socket's addresses for logs.
func (c *Conn) LocalAddr() net.Addr  { return c.nc.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Abort closes the socket at once, without a close handshake: used when the peer
// is known dead (heartbeat timeout) or on shutdown deadlines.
func (c *Conn) Abort() {
	c.abortOnce.Do(func() {
		c.closing.Store(true)
		c.q.Close() // a Send waiting for room returns ErrClosed now
		c.wakeClose()
		_ = c.nc.Close()
		c.mu.Lock()
		c.aborted = true
		idle := !c.writing
		c.mu.Unlock()
		if idle { // otherwise the writer closes done as it exits
			c.ended()
		}
	})
}
