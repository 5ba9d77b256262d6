package wsconn

import (
	"compress/flate"
	"runtime"
	"testing"
)

// takeoverBytes, what a connection with context takeover counts on the
// budget for its life, covers what it keeps: hist's window and a
// decompressor, measured here so that a Go release that grows
// compress/flate's state shows up as a failure, not as memory the budget
// does not see.
func TestTakeoverBytes(t *testing.T) {
	const n = 100
	keep := make([]any, 0, n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		keep = append(keep, flate.NewReader(&messageSource{}))
	}
	runtime.ReadMemStats(&after)
	per := int64(after.TotalAlloc-before.TotalAlloc) / n
	runtime.KeepAlive(keep)
	counted := int64(takeoverBytes - windowBytes)
	if per > counted || per < counted-4<<10 {
		t.Fatalf("a decompressor allocates %d B, takeoverBytes counts %d B for it: update takeoverBytes", per, counted)
	}
	t.Logf("a decompressor allocates %d B, counted as %d B", per, counted)
}
