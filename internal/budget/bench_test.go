package budget

import "testing"

// BenchmarkReserveRelease is what a buffer pays per message: a reservation
// within the share and its release. It must not allocate.
func BenchmarkReserveRelease(b *testing.B) {
	bud := newBudget(b, 1<<30, 1<<20, 16)
	a := bud.Open()
	b.ReportAllocs()
	for b.Loop() {
		if !a.TryReserve(64) {
			b.Fatal("refused")
		}
		a.Release(64)
	}
}

// BenchmarkReserveReleasePool is the same beyond the share, drawing on the
// pool, from several goroutines at once.
func BenchmarkReserveReleasePool(b *testing.B) {
	bud := newBudget(b, 1<<30, 1<<10, 16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		a := bud.Open()
		a.TryReserve(1 << 10)
		for pb.Next() {
			if !a.TryReserve(64) {
				b.Fatal("refused")
			}
			a.Release(64)
		}
	})
}
