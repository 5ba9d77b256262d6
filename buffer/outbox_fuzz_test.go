package buffer

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// fuzzMsg builds a message of size bytes that carries id in its spare
// capacity, so messages of any size, zero included, stay identifiable
// without the id counting towards Bytes.
func fuzzMsg(id uint64, size int) Message {
	buf := make([]byte, size+8)
	binary.LittleEndian.PutUint64(buf[size:], id)
	return Message{Data: buf[: size : size+8]}
}

func fuzzID(m Message) uint64 {
	return binary.LittleEndian.Uint64(m.Data[len(m.Data) : len(m.Data)+8])
}

// outboxModel is the obviously correct reference: a plain slice with the
// overflow rules written out directly.
type outboxModel struct {
	q                     []Message
	bytes                 int
	maxMessages, maxBytes int
	policy                Overflow
}

func (m *outboxModel) fits(size int) bool {
	return len(m.q)+1 <= m.maxMessages && m.bytes+size <= m.maxBytes
}

func (m *outboxModel) push(msg Message) (dropped []uint64, full bool) {
	size := len(msg.Data)
	if !m.fits(size) {
		if m.policy == OverflowClose {
			return nil, true
		}
		if m.policy == OverflowDropNewest || size > m.maxBytes {
			return []uint64{fuzzID(msg)}, false
		}
		for !m.fits(size) {
			dropped = append(dropped, fuzzID(m.q[0]))
			m.bytes -= len(m.q[0].Data)
			m.q = m.q[1:]
		}
	}
	m.q = append(m.q, msg)
	m.bytes += size
	return dropped, false
}

type fuzzRun struct {
	t        *testing.T
	o        *Outbox
	model    outboxModel
	nextID   uint64
	popped   []Message       // stack of popped messages not yet put back
	fate     map[uint64]bool // id -> consumed (popped for good, dropped or refused)
	overCaps bool            // a PushFront took the outbox above its caps
}

func (r *fuzzRun) withinCaps() bool {
	return r.o.Len() <= r.model.maxMessages && r.o.Bytes() <= r.model.maxBytes
}

func (r *fuzzRun) push(size int) {
	m := fuzzMsg(r.nextID, size)
	r.nextID++
	wasWithin := r.withinCaps()
	dropped, err := r.o.Push(m)
	wantDropped, wantFull := r.model.push(m)
	if wantFull != errors.Is(err, ErrOutboxFull) || (!wantFull && err != nil) {
		r.t.Fatalf("Push(size %d) error %v, want full=%v", size, err, wantFull)
	}
	var got []uint64
	for _, d := range dropped {
		got = append(got, fuzzID(d))
	}
	if !slices.Equal(got, wantDropped) {
		r.t.Fatalf("Push(size %d) dropped %v, want %v", size, got, wantDropped)
	}
	for _, id := range got {
		r.consume(id)
	}
	if wantFull {
		r.consume(fuzzID(m))
	}
	if wasWithin && !r.withinCaps() {
		r.t.Fatalf("Push took the outbox above its caps: %d messages, %d bytes", r.o.Len(), r.o.Bytes())
	}
	if r.model.policy == OverflowDropOldest && size <= r.model.maxBytes && !r.withinCaps() {
		r.t.Fatalf("drop-oldest Push left %d messages, %d bytes above the caps", r.o.Len(), r.o.Bytes())
	}
}

func (r *fuzzRun) consume(id uint64) {
	if r.fate[id] {
		r.t.Fatalf("message %d consumed twice", id)
	}
	r.fate[id] = true
}

func (r *fuzzRun) pop() {
	m, ok := r.o.Pop()
	if ok != (len(r.model.q) > 0) {
		r.t.Fatalf("Pop ok=%v with %d messages in the model", ok, len(r.model.q))
	}
	if !ok {
		return
	}
	if want := fuzzID(r.model.q[0]); fuzzID(m) != want {
		r.t.Fatalf("Pop returned message %d, want %d", fuzzID(m), want)
	}
	r.model.bytes -= len(m.Data)
	r.model.q = r.model.q[1:]
	r.popped = append(r.popped, m)
}

// pushFront puts back the most recently popped message, as a session does
// when a send fails; taking them from a stack keeps the global FIFO order.
func (r *fuzzRun) pushFront() {
	if len(r.popped) == 0 {
		r.pop()
		return
	}
	m := r.popped[len(r.popped)-1]
	r.popped = r.popped[:len(r.popped)-1]
	r.o.PushFront(m)
	r.model.q = slices.Insert(r.model.q, 0, m)
	r.model.bytes += len(m.Data)
	if !r.withinCaps() {
		r.overCaps = true
	}
}

func (r *fuzzRun) check() {
	if r.o.Len() != len(r.model.q) || r.o.Bytes() != r.model.bytes {
		r.t.Fatalf("Len, Bytes = %d, %d; model has %d, %d", r.o.Len(), r.o.Bytes(), len(r.model.q), r.model.bytes)
	}
	if !r.overCaps && !r.withinCaps() {
		r.t.Fatalf("%d messages, %d bytes exceed caps %d, %d without PushFront",
			r.o.Len(), r.o.Bytes(), r.model.maxMessages, r.model.maxBytes)
	}
}

// finish drains the outbox and checks the survivors come out in push order,
// their sizes add up to Bytes, and every message pushed is accounted for
// exactly once.
func (r *fuzzRun) finish() {
	for _, m := range r.popped {
		r.consume(fuzzID(m))
	}
	total, last := r.o.Bytes(), int64(-1)
	for r.o.Len() > 0 {
		m, _ := r.o.Pop()
		id := fuzzID(m)
		if int64(id) <= last {
			r.t.Fatalf("message %d came out after %d: FIFO order broken", id, last)
		}
		last = int64(id)
		total -= len(m.Data)
		r.consume(id)
	}
	if total != 0 || r.o.Bytes() != 0 {
		r.t.Fatalf("Bytes was off by %d from the sum of the survivors' sizes", total)
	}
	if uint64(len(r.fate)) != r.nextID {
		r.t.Fatalf("%d of %d messages accounted for", len(r.fate), r.nextID)
	}
}

// FuzzOutbox drives random Push/Pop/PushFront sequences against the model.
// Each op byte: the low two bits pick the operation (0, 1 push; 2 pop;
// 3 put back), the high six bits the pushed message's size.
func FuzzOutbox(f *testing.F) {
	f.Add([]byte{0x00, 0x04, 0x08, 0x02, 0x03, 0x40}, uint8(2), uint16(16), uint8(0))
	f.Add([]byte{0x10, 0x10, 0x10, 0xfc, 0x02, 0x02, 0x03, 0x03, 0x14}, uint8(4), uint16(12), uint8(1))
	f.Add([]byte{0x04, 0x04, 0x04, 0x04, 0x02, 0x04, 0x03, 0x04}, uint8(2), uint16(63), uint8(2))
	f.Fuzz(func(t *testing.T, ops []byte, maxMessages uint8, maxBytes uint16, policy uint8) {
		maxM, maxB := int(maxMessages%16)+1, int(maxBytes%64)+1
		p := Overflow(policy % 3)
		r := &fuzzRun{
			t:     t,
			o:     NewOutbox(maxM, maxB, p),
			model: outboxModel{maxMessages: maxM, maxBytes: maxB, policy: p},
			fate:  map[uint64]bool{},
		}
		for _, op := range ops {
			switch op & 3 {
			case 0, 1:
				r.push(int(op >> 2))
			case 2:
				r.pop()
			case 3:
				r.pushFront()
			}
			r.check()
		}
		r.finish()
	})
}
