package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/sendq"
	"github.com/tetherproxy/tether/internal/sse"
)

// entry is an encoded event of size bytes.
func entry(size int) []byte { return bytes.Repeat([]byte{'x'}, size) }

// logOp is one step of a table test on sseLog.
type logOp struct {
	op     string // add, take, wrote, resume
	arg    uint64 // add: size; wrote: upTo; resume: after; take: max bytes
	fits   bool   // add: the expected answer of fits
	upTo   uint64 // take: expected
	parts  int    // take: expected count
	lost   uint64 // resume: expected
	first  uint64 // after the step
	cursor uint64
	kept   int64 // bytes
	pend   int64
}

// The log keeps written events only while they leave room, never evicts a
// pending one, takes an oversized event when nothing is pending, and
// resumes from any position it still holds, counting what it no longer
// does.
func TestSSELog(t *testing.T) {
	tests := []struct {
		name string
		ops  []logOp
	}{
		{"pending events fill the limit, then block", []logOp{
			{op: "add", arg: 40, fits: true, first: 1, cursor: 1, kept: 40, pend: 40},
			{op: "add", arg: 40, fits: true, first: 1, cursor: 1, kept: 80, pend: 80},
			{op: "add", arg: 40, fits: false, first: 1, cursor: 1, kept: 80, pend: 80},
		}},
		{"written events make room, oldest first", []logOp{
			{op: "add", arg: 40, fits: true, first: 1, cursor: 1, kept: 40, pend: 40},
			{op: "add", arg: 40, fits: true, first: 1, cursor: 1, kept: 80, pend: 80},
			{op: "take", arg: 1 << 20, upTo: 3, parts: 2, first: 1, cursor: 1, kept: 80, pend: 80},
			{op: "wrote", arg: 3, first: 1, cursor: 3, kept: 80, pend: 0},
			{op: "add", arg: 30, fits: true, first: 2, cursor: 3, kept: 70, pend: 30},
			{op: "add", arg: 30, fits: true, first: 2, cursor: 3, kept: 100, pend: 60},
			{op: "add", arg: 30, fits: true, first: 3, cursor: 3, kept: 90, pend: 90},
		}},
		{"an event larger than the limit passes alone", []logOp{
			{op: "add", arg: 40, fits: true, first: 1, cursor: 1, kept: 40, pend: 40},
			{op: "wrote", arg: 2, first: 1, cursor: 2, kept: 40, pend: 0},
			{op: "add", arg: 500, fits: true, first: 2, cursor: 2, kept: 500, pend: 500},
			{op: "add", arg: 10, fits: false, first: 2, cursor: 2, kept: 500, pend: 500},
		}},
		{"take stops at max bytes but takes one", []logOp{
			{op: "add", arg: 30, fits: true, first: 1, cursor: 1, kept: 30, pend: 30},
			{op: "add", arg: 30, fits: true, first: 1, cursor: 1, kept: 60, pend: 60},
			{op: "add", arg: 30, fits: true, first: 1, cursor: 1, kept: 90, pend: 90},
			{op: "take", arg: 10, upTo: 2, parts: 1, first: 1, cursor: 1, kept: 90, pend: 90},
			{op: "take", arg: 60, upTo: 3, parts: 2, first: 1, cursor: 1, kept: 90, pend: 90},
			{op: "wrote", arg: 2, first: 1, cursor: 2, kept: 90, pend: 60},
			{op: "take", arg: 1 << 20, upTo: 4, parts: 2, first: 1, cursor: 2, kept: 90, pend: 60},
		}},
		{"resume rewinds to the app's position", []logOp{
			{op: "add", arg: 10, fits: true, first: 1, cursor: 1, kept: 10, pend: 10},
			{op: "add", arg: 10, fits: true, first: 1, cursor: 1, kept: 20, pend: 20},
			{op: "add", arg: 10, fits: true, first: 1, cursor: 1, kept: 30, pend: 30},
			{op: "wrote", arg: 4, first: 1, cursor: 4, kept: 30, pend: 0},
			{op: "resume", arg: 1, lost: 0, first: 1, cursor: 2, kept: 30, pend: 20},
			{op: "resume", arg: 3, lost: 0, first: 1, cursor: 4, kept: 30, pend: 0},
			{op: "resume", arg: 0, lost: 0, first: 1, cursor: 1, kept: 30, pend: 30},
		}},
		{"resume past the evicted counts the loss", []logOp{
			{op: "add", arg: 40, fits: true, first: 1, cursor: 1, kept: 40, pend: 40},
			{op: "add", arg: 40, fits: true, first: 1, cursor: 1, kept: 80, pend: 80},
			{op: "wrote", arg: 3, first: 1, cursor: 3, kept: 80, pend: 0},
			{op: "add", arg: 40, fits: true, first: 2, cursor: 3, kept: 80, pend: 40},
			{op: "add", arg: 40, fits: true, first: 3, cursor: 3, kept: 80, pend: 80},
			{op: "resume", arg: 0, lost: 2, first: 3, cursor: 3, kept: 80, pend: 80},
			{op: "resume", arg: 1, lost: 1, first: 3, cursor: 3, kept: 80, pend: 80},
			{op: "resume", arg: 2, lost: 0, first: 3, cursor: 3, kept: 80, pend: 80},
		}},
		{"an event that waits evicts nothing", []logOp{
			{op: "add", arg: 30, fits: true, first: 1, cursor: 1, kept: 30, pend: 30},
			{op: "wrote", arg: 2, first: 1, cursor: 2, kept: 30, pend: 0},
			{op: "add", arg: 50, fits: true, first: 1, cursor: 2, kept: 80, pend: 50},
			{op: "add", arg: 60, fits: false, first: 1, cursor: 2, kept: 80, pend: 50},
			{op: "wrote", arg: 3, first: 1, cursor: 3, kept: 80, pend: 0},
			{op: "add", arg: 60, fits: true, first: 3, cursor: 3, kept: 60, pend: 60},
		}},
		{"resume beyond the head skips nothing", []logOp{
			{op: "add", arg: 10, fits: true, first: 1, cursor: 1, kept: 10, pend: 10},
			{op: "resume", arg: 99, lost: 0, first: 1, cursor: 2, kept: 10, pend: 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newSSELog(100)
			for i, op := range tc.ops {
				switch op.op {
				case "add":
					// As SSEApp queues an event: it waits unless it fits
					// the pending bytes (its queue), then evicts.
					size := int64(op.arg)
					if got := sendq.Fits(l.pending, size, l.limit); got != op.fits {
						t.Fatalf("step %d: fits(%d) = %v, want %v", i, op.arg, got, op.fits)
					}
					if op.fits {
						l.evict(size)
						l.add(entry(int(op.arg)), "")
					}
				case "take":
					parts, upTo := l.take(nil, int64(op.arg))
					if len(parts) != op.parts || upTo != op.upTo {
						t.Fatalf("step %d: take = %d parts up to %d, want %d up to %d", i, len(parts), upTo, op.parts, op.upTo)
					}
				case "wrote":
					l.wrote(op.arg)
				case "resume":
					if got := l.resume(op.arg); got != op.lost {
						t.Fatalf("step %d: resume(%d) lost %d, want %d", i, op.arg, got, op.lost)
					}
				}
				if l.first != op.first || l.cursor != op.cursor || l.bytes != op.kept || l.pending != op.pend {
					t.Fatalf("step %d (%s): first %d cursor %d kept %d pending %d, want %d %d %d %d", i, op.op,
						l.first, l.cursor, l.bytes, l.pending, op.first, op.cursor, op.kept, op.pend)
				}
			}
		})
	}
}

// Only ids tether writes parse: a token of crypto/rand.Text's alphabet
// and length, a dash, a decimal number.
func TestParseEventID(t *testing.T) {
	token := rand.Text()
	tests := []struct {
		id    string
		ok    bool
		token string
		n     uint64
	}{
		{eventID(token, 0), true, token, 0},
		{eventID(token, 18446744073709551615), true, token, 18446744073709551615},
		{token + "-18446744073709551616", false, "", 0},
		{token + "-", false, "", 0},
		{token + "-+1", false, "", 0},
		{token + "--1", false, "", 0},
		{token + "-1-2", false, "", 0},
		{token, false, "", 0},
		{strings.ToLower(token) + "-1", false, "", 0},
		{token[:25] + "-1", false, "", 0},
		{"42", false, "", 0},
		{"", false, "", 0},
	}
	for _, tc := range tests {
		gotToken, n, ok := ParseEventID(tc.id)
		if ok != tc.ok || gotToken != tc.token || n != tc.n {
			t.Errorf("ParseEventID(%q) = %q, %d, %v; want %q, %d, %v", tc.id, gotToken, n, ok, tc.token, tc.n, tc.ok)
		}
	}
	if a, b := newSSEToken(), newSSEToken(); a == b || len(a) < minTokenLen {
		t.Errorf("tokens %q and %q: want distinct, at least %d characters", a, b, minTokenLen)
	}
}

// Each upstream message is one event that reads back as it was sent: an
// SSE upstream's event with its type and data, any other text as data,
// binary as base64; the id line, added last by Send, is read as the
// event's id: the SSE upstream's own when it has one (Want.ID), tether's
// otherwise.
func TestSSEEventEncoding(t *testing.T) {
	tests := []struct {
		name string
		op   ws.OpCode
		msg  string
		json bool
		want sse.Event
	}{
		{"text", ws.OpText, "hello", false, sse.Event{Type: "message", Data: "hello"}},
		{"multi-line", ws.OpText, "a\r\nb\rc\n", false, sse.Event{Type: "message", Data: "a\nb\nc\n"}},
		{"empty", ws.OpText, "", false, sse.Event{Type: "message", Data: ""}},
		{"binary", ws.OpBinary, "\x00\n\xff", false, sse.Event{Type: "message", Data: "AAr/"}},
		{"sse json", ws.OpText, `{"id":"9","event":"price","data":"1\n2"}`, true, sse.Event{Type: "price", Data: "1\n2", ID: "9"}},
		{"sse json id with a NUL", ws.OpText, `{"id":"9\u0000","event":"price","data":"1"}`, true, sse.Event{Type: "price", Data: "1"}},
		{"sse json default type", ws.OpText, `{"id":"","event":"","data":"x"}`, true, sse.Event{Type: "message", Data: "x"}},
		{"json off", ws.OpText, `{"event":"price","data":"1"}`, false, sse.Event{Type: "message", Data: `{"event":"price","data":"1"}`}},
		{"not the json shape", ws.OpText, `plain`, true, sse.Event{Type: "message", Data: "plain"}},
		{"type with a line break", ws.OpText, `{"event":"a\nb","data":"1"}`, true, sse.Event{Type: "message", Data: `{"event":"a\nb","data":"1"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewSSEApp(SSEOptions{JSON: tc.json})
			a.mu.Lock()
			a.log.first, a.log.next, a.log.cursor = 5, 5, 5 // the session's fifth event
			a.addLocked(a.encode(tc.op, []byte(tc.msg), ""))
			b := a.log.entries[0].b
			a.mu.Unlock()
			r := sse.NewReader(bytes.NewReader(b), sse.Options{})
			item, err := r.Next()
			want := tc.want
			if want.ID == "" {
				want.ID = eventID(a.token, 5)
			}
			if err != nil || item.Kind != sse.KindEvent || item.Event != want {
				t.Fatalf("%q read back as %+v (%v), want %+v", b, item, err, want)
			}
		})
	}
}

// An event carries the name the session gives its message (AppendID),
// unless a JSON message carries the upstream's own id, or the name is one
// an event cannot carry: then tether's token id. The name is what a
// resume finds it by.
func TestSSEEventNamed(t *testing.T) {
	tests := []struct {
		name, msg, named, want string
		json                   bool
	}{
		{"named", "x", "prices:7", "prices:7", false},
		{"no name", "x", "", "", false},
		{"a name with a line break", "x", "a\nb:7", "", false},
		{"a name with a NUL", "x", "a\x00:7", "", false},
		{"json id first", `{"id":"u9","event":"message","data":"x"}`, "prices:7", "u9", true},
		{"json without an id", `{"id":"","event":"message","data":"x"}`, "prices:7", "prices:7", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewSSEApp(SSEOptions{JSON: tc.json})
			var b sendq.Batch
			a.AppendID(&b, ws.OpText, []byte(tc.msg), tc.named)
			if n, err := a.SendBatch(context.Background(), &b); n != 1 || err != nil {
				t.Fatalf("SendBatch = %d, %v", n, err)
			}
			a.mu.Lock()
			e := a.log.entries[0]
			a.mu.Unlock()
			item, err := sse.NewReader(bytes.NewReader(e.b), sse.Options{}).Next()
			want := tc.want
			if want == "" {
				want = eventID(a.token, 1)
			}
			if err != nil || item.Event.ID != want || item.Event.Data != "x" {
				t.Fatalf("%q read back as %+v (%v), want id %q and data x", e.b, item, err, want)
			}
			if n, _, ok := a.HoldsID(want); tc.want != "" && (!ok || n != 1) {
				t.Errorf("HoldsID(%q) = %d, %v; want event 1", want, n, ok)
			}
		})
	}
}

// The written events the log keeps count on the session's memory budget,
// the pending ones being the queue's to count; when the budget cannot give
// the bytes an event takes once written, the oldest written events are
// evicted, as the limit evicts them, and a resume counts them as lost.
func TestSSELogMemoryBudget(t *testing.T) {
	mem, err := budget.New(budget.Options{Limit: 60, Share: 60, Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	acct := mem.Open()
	l := newSSELog(1000)
	check := func(step string, held int64, first uint64) {
		t.Helper()
		if acct.Held() != held || l.first != first {
			t.Fatalf("%s: account holds %d, first %d; want %d, %d", step, acct.Held(), l.first, held, first)
		}
	}
	// What SSEApp's queue counts: the pending bytes.
	l.add(entry(40), "")
	acct.Reserve(40)
	l.keep(acct)
	check("one event pending", 40, 1)
	l.wrote(2)
	acct.Release(40)
	l.keep(acct)
	check("one event written", 40, 1)
	l.add(entry(30), "")
	acct.Reserve(30) // the queue was empty (sendq takes it)
	l.keep(acct)
	check("a second event pending", 70, 1)
	l.wrote(3)
	acct.Release(30)
	l.keep(acct)
	check("the second written, the first evicted for the budget", 30, 2)
	if lost := l.resume(0); lost != 1 {
		t.Fatalf("resume from the start lost %d, want the evicted one", lost)
	}
	l.keep(acct)
	check("resumed: nothing written is kept", 0, 2)
	acct.Reserve(l.pending) // the queue's recount
	check("resumed, the queue counted", 30, 2)
}
