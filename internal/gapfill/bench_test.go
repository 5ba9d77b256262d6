package gapfill

import (
	"fmt"
	"strings"
	"testing"
)

// benchAnswer is 1000 event messages as a JSON array or as NDJSON.
func benchAnswer(ndjson bool) []byte {
	msgs := make([]string, 1000)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(`{"t":"event","seq":%d,"body":"hello, world"}`, i+1)
	}
	if ndjson {
		return []byte(strings.Join(msgs, "\n") + "\n")
	}
	return []byte("[" + strings.Join(msgs, ",") + "]")
}

func BenchmarkParseArray(b *testing.B) {
	body := benchAnswer(false)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(body, "application/json"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseNDJSON(b *testing.B) {
	body := benchAnswer(true)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(body, "application/x-ndjson"); err != nil {
			b.Fatal(err)
		}
	}
}
