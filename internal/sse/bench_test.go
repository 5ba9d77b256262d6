package sse

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
)

// benchEvent is a typical event of about 200 bytes: an id, a named type
// and one line of JSON. benchStream repeats it with rising ids, so every
// event changes the last event ID as a live stream's do.
var benchEvent = "id: 1048576\nevent: price\ndata: " +
	`{"t":"event","seq":1048576,"channel":"quotes.eu","symbol":"ACME","bid":101.25,"ask":101.27,"size":300,"venue":"XPAR","ts":"2026-01-02T15:04:05.123456Z","flags":["open","live"]}` +
	"\n\n"

func benchStream() []byte {
	var b []byte
	for i := range 1000 {
		b = append(b, strings.Replace(benchEvent, "1048576", strconv.Itoa(1048576+i), 2)...)
	}
	return b
}

// repeatReader serves the same bytes forever, in reads of at most chunk
// bytes, like a response body delivering one event per TCP segment.
type repeatReader struct {
	data  []byte
	off   int
	chunk int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p[:min(len(p), r.chunk)], r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}

func BenchmarkReader(b *testing.B) {
	for _, bc := range []struct {
		name  string
		chunk int
	}{{"event-per-read", len(benchEvent)}, {"4KiB-reads", 4096}, {"64B-reads", 64}} {
		b.Run(bc.name, func(b *testing.B) {
			r := NewReader(&repeatReader{data: benchStream(), chunk: bc.chunk}, Options{})
			b.SetBytes(int64(len(benchEvent)))
			b.ReportAllocs()
			for b.Loop() {
				if it, err := r.Next(); err != nil || it.Kind != KindEvent {
					b.Fatalf("got %v, %v", it.Kind, err)
				}
			}
		})
	}
}

func BenchmarkEncoder(b *testing.B) {
	ev := Event{Type: "price", Data: strings.TrimSuffix(strings.SplitN(benchEvent, "data: ", 2)[1], "\n\n")}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = strconv.Itoa(1048576 + i)
	}
	e := NewEncoder(io.Discard)
	b.SetBytes(int64(len(benchEvent)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		ev.ID = ids[i%len(ids)] // a new id each event, as a live stream has
		if err := e.Event(ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeInvalid(b *testing.B) {
	line := bytes.Repeat([]byte("abc\xE2\x82"), 40)
	var dst []byte
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		dst = appendDecoded(dst[:0], line)
	}
}
