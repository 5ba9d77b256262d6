package wsconn

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkCompress is the CPU one message costs to compress on its own,
// as Send does with Deflate.Compress, by size: a JSON message repeated.
func BenchmarkCompress(b *testing.B) {
	one := []byte(`{"type":"order","symbol":"EURUSD","side":"buy","qty":100,"price":1.0842,"client_id":"c-1842"}`)
	for _, n := range []int{1, 4, 32} {
		msg := bytes.Repeat(one, n)
		b.Run(fmt.Sprintf("%dB", len(msg)), func(b *testing.B) {
			var out int
			b.ReportAllocs()
			for range b.N {
				z := compress(msg)
				out = len(z.b)
				z.release()
			}
			b.ReportMetric(float64(out), "compressed-B")
		})
	}
}
