package churn_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// An app's transport: one of tether's three listener kinds over TCP.
type appKind int

const (
	kindWS appKind = iota
	kindTCP
	kindSSE
	numKinds
)

func (k appKind) String() string { return [...]string{"ws", "tcp", "sse"}[k] }

// How an app's session ends.
type ending int

const (
	// endClean: the app exchanges a message, then closes politely (a
	// WebSocket close handshake, a FIN).
	endClean ending = iota
	// endReset: the app exchanges a message, then resets its TCP
	// connection (SO_LINGER 0), as a killed process's kernel does.
	endReset
	// endHalfRequest: the app writes half its handshake request and
	// vanishes (a tcp:// app, which has no handshake, connects and leaves
	// at once, while tether awaits its first upstream dial).
	endHalfRequest
	// endBeforeAnswer: the app writes its whole handshake request and
	// vanishes before tether answers it, while tether admits it and dials
	// the upstream for it (a tcp:// app sends one line and resets).
	endBeforeAnswer
	numEndings
)

func (e ending) String() string {
	return [...]string{"clean", "reset", "half-request", "before-answer"}[e]
}

// targets are tether's three app listeners.
type targets struct {
	ws, tcp, sse string // host:port
	ssePath      string
}

// greeting is what the upstream sends first on every connection: an sse://
// app, which sends nothing, reads it as its first event.
const greeting = "hello"

// runApp plays one app session of kind k ending with e, waiting at most
// wait to connect and for its handshake's answer, and answerWait for the
// answer to its message. It reports whether the app got its answer (the echo
// of its message, or an event for sse://); an answer that does not come in
// time (the upstream is down, or died with the message) is not an error:
// the app leaves anyway, as do apps refused with 503 or 502. An error is
// something the app could not do at all.
func runApp(tg targets, k appKind, e ending, id int, wait time.Duration) (answered bool, err error) {
	if e == endHalfRequest || e == endBeforeAnswer {
		return false, vanish(tg.addr(k), k, e, tg.ssePath, wait)
	}
	c, answered, err := openApp(tg, k, id, wait)
	if c == nil {
		return false, err
	}
	if e == endClean && k == kindWS {
		closeWS(c)
	}
	return answered, errors.Join(err, end(c, e))
}

func (tg targets) addr(k appKind) string {
	return map[appKind]string{kindWS: tg.ws, kindTCP: tg.tcp, kindSSE: tg.sse}[k]
}

// openApp connects an app of kind k and waits for its answer. It returns
// a nil conn when the app was refused or could not connect.
func openApp(tg targets, k appKind, id int, wait time.Duration) (net.Conn, bool, error) {
	switch k {
	case kindWS:
		return wsApp(tg.ws, id, wait)
	case kindTCP:
		return lineApp(tg.tcp, id, wait)
	default:
		return sseApp(tg.sse, tg.ssePath, wait)
	}
}

// vanish connects, writes part or all of a handshake request (for tcp://,
// nothing or one line), and goes: half requests with a FIN, whole ones
// with a reset.
func vanish(addr string, k appKind, e ending, ssePath string, wait time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return gaveUp("dial "+addr, err)
	}
	req := map[appKind]string{
		kindWS:  wsRequest(addr),
		kindTCP: "gone\n",
		kindSSE: sseRequest(addr, ssePath),
	}[k]
	if e == endHalfRequest {
		req = req[:len(req)/2]
		if k == kindTCP {
			req = ""
		}
	}
	// A request this short fits the socket's buffer whether tether reads it
	// or not: a write timeout is the app's own scheduling (the deadline
	// passed before the write ran), so it gave up rather than failed.
	_ = c.SetWriteDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, req); err != nil {
		_ = c.Close()
		return gaveUp("write request", err)
	}
	if e == endBeforeAnswer {
		_ = c.(*net.TCPConn).SetLinger(0)
	}
	return c.Close()
}

func wsRequest(addr string) string {
	return "GET / HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
}

func sseRequest(addr, path string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\n\r\n"
}

// end closes c as e says: a FIN, or a reset.
func end(c net.Conn, e ending) error {
	if e == endReset {
		_ = c.(*net.TCPConn).SetLinger(0)
	}
	return c.Close()
}

func wsApp(addr string, id int, wait time.Duration) (net.Conn, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, _, _, err := ws.Dialer{}.Dial(ctx, "ws://"+addr+"/")
	if err != nil {
		if isRefusal(err) {
			return nil, false, nil
		}
		return nil, false, gaveUp("handshake", err)
	}
	msg := "m" + strconv.Itoa(id)
	_ = c.SetDeadline(time.Now().Add(answerWait))
	answered := false
	if err := wsutil.WriteClientText(c, []byte(msg)); err == nil {
		answered = awaitEcho(c, msg)
	}
	return c, answered, nil
}

// isRefusal reports a handshake tether answered with an HTTP status (503
// while the sessions are full, 502 when the upstream refused): an app
// refused is a session that never started, not a failure of the churn.
func isRefusal(err error) bool {
	var status ws.StatusError
	return errors.As(err, &status)
}

// errGaveUp is an app that gave up waiting to connect or for its
// handshake's answer: on a machine this busy that may take longer than the
// app waits, and the app then leaves, which is churn too (what tether
// leaves behind is checked after). The churn counts these apart.
var errGaveUp = errors.New("gave up waiting")

// gaveUp wraps a timeout in errGaveUp.
func gaveUp(what string, err error) error {
	if isTimeout(err) {
		return fmt.Errorf("%s: %w: %w", what, errGaveUp, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// awaitEcho reads until the echo of msg; the greeting and anything else
// before it are skipped.
func awaitEcho(c net.Conn, msg string) bool {
	for {
		data, err := wsutil.ReadServerText(c)
		if err != nil {
			return false
		}
		if string(data) == msg {
			return true
		}
	}
}

// closeWS runs the closing handshake: a close 1000, then reading until
// tether's close (or the deadline).
func closeWS(c net.Conn) {
	body := ws.NewCloseFrameBody(ws.StatusNormalClosure, "bye")
	if err := ws.WriteFrame(c, ws.MaskFrame(ws.NewCloseFrame(body))); err != nil {
		return
	}
	for {
		if _, err := wsutil.ReadServerText(c); err != nil {
			return
		}
	}
}

func lineApp(addr string, id int, wait time.Duration) (net.Conn, bool, error) {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return nil, false, gaveUp("dial "+addr, err)
	}
	_ = c.SetDeadline(time.Now().Add(answerWait))
	msg := "m" + strconv.Itoa(id)
	answered := false
	if _, err := io.WriteString(c, msg+"\n"); err == nil {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break
			}
			if line == msg+"\n" {
				answered = true
				break
			}
		}
	}
	return c, answered, nil
}

// sseApp requests the event stream and reads its first event. A refusal
// (503, 502) is not an error.
func sseApp(addr, path string, wait time.Duration) (net.Conn, bool, error) {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return nil, false, gaveUp("dial "+addr, err)
	}
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, sseRequest(addr, path)); err != nil {
		_ = c.Close()
		return nil, false, gaveUp("write request", err) // as in vanish
	}
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		_ = c.Close()
		return nil, false, nil // not answered before the app's deadline: it left
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		_ = c.Close()
		if strings.HasPrefix(status, "HTTP/1.1 50") {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("sse response %q", strings.TrimSpace(status))
	}
	_ = c.SetDeadline(time.Now().Add(answerWait))
	answered := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, "data:") {
			answered = true
			break
		}
	}
	return c, answered, nil
}
