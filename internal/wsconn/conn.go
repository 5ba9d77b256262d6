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
	// WriteTimeout bounds each flush to the socket. Zero means no deadline: the
	// owner detects a stuck peer itself (heartbeat) and calls Abort.
	WriteTimeout time.Duration
	// CloseWait bounds how long Close waits for queued data to be written and for
	// the peer's close frame before it closes TCP. Zero means DefaultCloseWait.
	CloseWait time.Duration
	// Pong is called from the reader when a pong arrives (heartbeat bookkeeping).
	// It must not block.
	Pong func()
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
	br   *bufio.Reader
	opts Options

	// Reader state, touched only by the reading goroutine.
	hdr     [ws.MaxHeaderSize]byte
	ctl     [125]byte
	msg     []byte
	readErr error

	// lastRead is the monotonic time (nanoseconds since epoch) of the last frame
	// header read, for heartbeats.
	lastRead atomic.Int64

	// Writer side.
	ctrl      chan *frame   // pongs, pings: written before queued data
	data      chan *frame   // data frames, in order
	closeq    chan *frame   // the one close frame, written once data is drained
	quit      chan struct{} // closed by Abort
	done      chan struct{} // closed when the writer has exited and TCP is closed
	peerClose chan struct{} // closed when the reader has seen the peer's close
	closing   atomic.Bool   // Close or Abort was called, or a close was echoed
	abortOnce sync.Once
	peerOnce  sync.Once

	mu       sync.Mutex
	queued   int64
	space    chan struct{} // closed when queued shrinks and someone waits
	waiting  bool
	writeErr error
}

// epoch anchors lastRead on the monotonic clock.
var epoch = time.Now()

func monotonic() int64 { return int64(time.Since(epoch)) }

// New wraps an established connection. br may hold bytes the peer sent together
// with its handshake response (gobwas returns them from Dial): they are read first.
// New starts the writer goroutine; the caller must eventually call Close or Abort.
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
	c := &Conn{
		nc:        nc,
		opts:      opts,
		ctrl:      make(chan *frame, 4),
		data:      make(chan *frame, 256),
		closeq:    make(chan *frame, 1),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		peerClose: make(chan struct{}),
		space:     make(chan struct{}),
	}
	c.br = bufio.NewReaderSize(pending(nc, br), readBufferSize)
	c.lastRead.Store(monotonic())
	go c.writeLoop()
	return c
}

const readBufferSize = 8 << 10

// pending returns a reader that yields what br already buffered, then nc. Reading
// nc directly would lose frames sent right after the handshake response.
func pending(nc net.Conn, br *bufio.Reader) io.Reader {
	if br == nil || br.Buffered() == 0 {
		return nc
	}
	early := make([]byte, br.Buffered())
	_, _ = io.ReadFull(br, early) // cannot fail: the bytes are buffered
	return io.MultiReader(bytes.NewReader(early), nc)
}

// LastRead reports when the last frame (of any kind) arrived.
func (c *Conn) LastRead() time.Time { return epoch.Add(time.Duration(c.lastRead.Load())) }

// Touch marks the connection as alive now. The owner calls it after it stops
// holding back reads (backpressure), so time spent not reading is not silence.
func (c *Conn) Touch() { c.lastRead.Store(monotonic()) }

// Done is closed once the writer has exited and the socket is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// LocalAddr and RemoteAddr expose the socket's addresses for logs.
func (c *Conn) LocalAddr() net.Addr  { return c.nc.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Abort closes the socket at once, without a close handshake: used when the peer
// is known dead (heartbeat timeout) or on shutdown deadlines.
func (c *Conn) Abort() {
	c.abortOnce.Do(func() {
		c.closing.Store(true)
		close(c.quit)
		_ = c.nc.Close()
	})
}
