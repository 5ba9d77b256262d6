package binarytest_test

import (
	"testing"

	"github.com/tetherproxy/tether/internal/binarytest"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP tether_gaps_total Sequence gaps.
# TYPE tether_gaps_total counter
tether_gaps_total{outcome="filled"} 2
tether_gaps_total{outcome="resync"} 3
go_goroutines 42
go_gc_heap_live_bytes 1.5e+06
tether_reconnect_seconds_bucket{le="+Inf"} 7
`
	m, err := binarytest.ParseMetrics([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"tether_gaps_total": 5, `tether_gaps_total{outcome="filled"}`: 2, `tether_gaps_total{outcome="resync"}`: 3,
		"go_goroutines": 42, "go_gc_heap_live_bytes": 1.5e6,
		"tether_reconnect_seconds_bucket": 7, `tether_reconnect_seconds_bucket{le="+Inf"}`: 7,
	}
	if len(m) != len(want) {
		t.Errorf("ParseMetrics = %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if _, err := binarytest.ParseMetrics([]byte("go_goroutines\n")); err == nil {
		t.Error("a line without a value parsed")
	}
}
