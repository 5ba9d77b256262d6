package wsconn

import (
	"bytes"
	"testing"

	"github.com/gobwas/ws"
)

// peekHeader reads every header length form (RFC 6455 §5.2) as gobwas
// encodes it, and refuses any header cut short.
func TestPeekHeader(t *testing.T) {
	for _, length := range []int64{0, 1, 125, 126, 65535, 65536, 1 << 40} {
		for _, h := range []ws.Header{
			{Fin: true, OpCode: ws.OpText, Length: length},
			{Fin: false, OpCode: ws.OpBinary, Length: length, Masked: true, Mask: [4]byte{1, 2, 3, 4}},
			{Fin: true, Rsv: ws.Rsv(true, false, true), OpCode: ws.OpContinuation, Length: length},
			{Fin: true, OpCode: ws.OpPing, Length: min(length, 125)},
		} {
			var buf bytes.Buffer
			if err := ws.WriteHeader(&buf, h); err != nil {
				t.Fatal(err)
			}
			b := buf.Bytes()
			got, n, ok := peekHeader(b)
			if !ok || n != len(b) || got != h {
				t.Errorf("%+v: peekHeader = %+v, %d, %v; want it back, %d, true", h, got, n, ok, len(b))
			}
			for cut := range len(b) {
				if _, _, ok := peekHeader(b[:cut]); ok {
					t.Errorf("%+v cut to %d of %d bytes: ok", h, cut, len(b))
				}
			}
		}
	}
}
