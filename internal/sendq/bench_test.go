package sendq

import (
	"context"
	"testing"
)

// BenchmarkQueue measures the queue's own cost per message with no
// contention: a Reserve, the count and the release, as a Send and its
// writer pay them. It must not allocate.
func BenchmarkQueue(b *testing.B) {
	o := newOwner(1 << 20)
	o.q.onWait = nil
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := o.q.Reserve(ctx, 64); err != nil {
			b.Fatal(err)
		}
		o.q.AddLocked(64)
		o.q.IdleLocked()
		o.mu.Unlock()
		o.q.Release(64)
	}
}
