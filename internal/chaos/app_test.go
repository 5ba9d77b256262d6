package chaos_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// app is the naive application: a plain gobwas client that connects to
// tether once, never reconnects, reads continuously and sends numbered
// messages at a steady pace. Everything it sees goes into its ledger.
type app struct {
	conn net.Conn
	wmu  sync.Mutex // the sender and the reader's pong replies

	mu       sync.Mutex
	l        appLedger
	closing  bool // the test is closing the socket: its end is expected
	progress chan struct{}

	wg       sync.WaitGroup
	stop     chan struct{}
	stopOnce sync.Once
}

// appLedger is what the app saw and sent.
type appLedger struct {
	welcomes   int
	firstSeq   int64
	lastSeq    int64
	events     int
	acks       map[string]int
	sent       []string
	violations []string // out of order, duplicate, unexpected message
	ended      string   // why the socket ended, if it did
}

func dialApp(t *testing.T, url string, timeout time.Duration) *app {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, br, _, err := ws.Dialer{Timeout: timeout}.Dial(ctx, url)
	if err != nil {
		t.Fatalf("app handshake: %v", err)
	}
	a := &app{
		conn:     conn,
		l:        appLedger{acks: map[string]int{}},
		progress: make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	// Frames tether sent right behind its 101 may already sit in br.
	var r io.Reader = conn
	if br != nil {
		r = io.MultiReader(io.LimitReader(br, int64(br.Buffered())), conn)
	}
	a.wg.Add(1)
	go a.readLoop(bufio.NewReader(r))
	t.Cleanup(a.close)
	return a
}

// close ends the sender and the reader and waits for them; idempotent.
func (a *app) close() {
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	a.stopSending()
	_ = a.conn.Close()
	a.wg.Wait()
}

func (a *app) write(op ws.OpCode, payload []byte) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return ws.WriteFrame(a.conn, ws.MaskFrame(ws.NewFrame(op, true, payload)))
}

func (a *app) readLoop(r *bufio.Reader) {
	defer a.wg.Done()
	var msg []byte
	for {
		h, err := ws.ReadHeader(r)
		if err != nil {
			a.ended(fmt.Sprintf("read: %v", err))
			return
		}
		payload := make([]byte, h.Length)
		if _, err := io.ReadFull(r, payload); err != nil {
			a.ended(fmt.Sprintf("read: %v", err))
			return
		}
		switch h.OpCode {
		case ws.OpPing:
			_ = a.write(ws.OpPong, payload)
		case ws.OpPong:
		case ws.OpClose:
			code, reason := ws.ParseCloseFrameData(payload)
			a.ended(fmt.Sprintf("tether closed the app with %d %q", code, reason))
			_ = a.write(ws.OpClose, payload)
			return
		default:
			msg = append(msg, payload...)
			if h.Fin {
				a.take(msg)
				msg = nil
			}
		}
	}
}

func (a *app) ended(why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closing && a.l.ended == "" {
		a.l.ended = why
	}
}

type feedMessage struct {
	T   string `json:"t"`
	Seq int64  `json:"seq"`
	ID  string `json:"id"`
}

// take checks one message from tether against the ledger.
func (a *app) take(raw []byte) {
	var m feedMessage
	err := json.Unmarshal(raw, &m)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err != nil:
		a.violationLocked("unparsable message %q", raw)
	case m.T == "welcome":
		a.l.welcomes++
		if a.l.welcomes > 1 {
			a.violationLocked("welcome #%d %s: the app must see exactly one", a.l.welcomes, raw)
		}
	case m.T == "event":
		a.eventLocked(m.Seq)
	case m.T == "ack":
		a.l.acks[m.ID]++
		if a.l.acks[m.ID] > 1 {
			a.violationLocked("ack %q delivered %d times", m.ID, a.l.acks[m.ID])
		}
	case m.T == "subscribed":
	default:
		a.violationLocked("unexpected message %s", raw)
	}
	select {
	case a.progress <- struct{}{}:
	default:
	}
}

func (a *app) eventLocked(seq int64) {
	switch {
	case a.l.events == 0 && seq != 1:
		a.violationLocked("first event is %d, want 1", seq)
	case a.l.events > 0 && seq != a.l.lastSeq+1:
		a.violationLocked("event %d after %d: gap or duplicate", seq, a.l.lastSeq)
	}
	if a.l.events == 0 {
		a.l.firstSeq = seq
	}
	a.l.events++
	a.l.lastSeq = seq
}

func (a *app) violationLocked(format string, args ...any) {
	// The first few are enough to diagnose; a broken stream would otherwise
	// produce one per event.
	if len(a.l.violations) < 20 {
		a.l.violations = append(a.l.violations, fmt.Sprintf(format, args...))
	}
}

// send writes one text message, recording a msg's id as sent.
func (a *app) send(t *testing.T, text string) {
	t.Helper()
	if err := a.write(ws.OpText, []byte(text)); err != nil {
		t.Fatalf("app send %q: %v", text, err)
	}
}

// startSending sends {"t":"msg","id":"mN"} every `every` until stopSending.
func (a *app) startSending(every time.Duration) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-a.stop:
				return
			case <-tick.C:
			}
			if !a.sendMsg("m" + strconv.Itoa(n)) {
				return
			}
		}
	}()
}

func (a *app) sendMsg(id string) bool {
	a.mu.Lock()
	a.l.sent = append(a.l.sent, id)
	a.mu.Unlock()
	err := a.write(ws.OpText, []byte(`{"t":"msg","id":`+strconv.Quote(id)+`,"body":"x"}`))
	if err != nil {
		a.ended(fmt.Sprintf("write: %v", err))
		return false
	}
	return true
}

// stopSending ends the sender; the reader keeps going.
func (a *app) stopSending() {
	a.stopOnce.Do(func() { close(a.stop) })
}

// snapshot copies the ledger.
func (a *app) snapshot() appLedger {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.l
	l.acks = make(map[string]int, len(a.l.acks))
	for id, n := range a.l.acks {
		l.acks[id] = n
	}
	l.sent = append([]string(nil), a.l.sent...)
	l.violations = append([]string(nil), a.l.violations...)
	return l
}

// waitFor waits until cond holds on the ledger, woken by every message the
// app takes; it reports false if bound passes first. cond runs under the
// ledger's lock, so it must only read it: a copy per event would cost a
// long soak more than the soak itself.
func (a *app) waitFor(bound time.Duration, cond func(*appLedger) bool) bool {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for !a.holds(cond) {
		select {
		case <-a.progress:
		case <-deadline.C:
			return a.holds(cond)
		}
	}
	return true
}

func (a *app) holds(cond func(*appLedger) bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return cond(&a.l)
}
