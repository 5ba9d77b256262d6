package rules

import (
	"fmt"
	"strings"
	"testing"
)

// benchMessage returns a JSON object of about 1 KiB: "op" first, filler
// fields of every JSON type (strings with escapes among them), "seq" and
// "tail" last.
func benchMessage(tb testing.TB) []byte {
	var b strings.Builder
	b.WriteString(`{"op":"update","channel":"trades.BTC-USD"`)
	for i := 0; b.Len() < 900; i++ {
		fmt.Fprintf(&b, `,"f%d":{"price":%d.25,"size":"0.%03d","side":"buy","ok":true,"n":null,"tags":["a","b\"c"]}`, i, 1000+i, i)
	}
	b.WriteString(`,"seq":1234567890123,"tail":"end"}`)
	for b.Len() < 1024 {
		b.WriteString(" ")
	}
	msg := []byte(b.String())
	if len(msg) != 1024 {
		tb.Fatalf("message is %d bytes", len(msg))
	}
	return msg
}

func BenchmarkMatch(b *testing.B) {
	msg := benchMessage(b)
	cases := []struct {
		name, pattern string
		want          bool
	}{
		{"first field matches", `{"op":"update"}`, true},
		{"last field matches", `{"tail":"end"}`, true},
		{"first and last fields match", `{"op":"update","tail":"end","seq":1234567890123}`, true},
		{"first field differs", `{"op":"subscribe"}`, false},
		{"field missing", `{"absent":1}`, false},
		{"nested", `{"f0":{"side":"buy","price":1000.25}}`, true},
		{"not an object", `{"op":"update"}`, false},
		{"regexp", `re:"tail":"end"`, true},
	}
	for _, c := range cases {
		m := mustCompile(b, c.pattern)
		data := msg
		if c.name == "not an object" {
			data = append([]byte("["), msg[1:]...)
		}
		if got := m.Match(data); got != c.want {
			b.Fatalf("%s: Match = %v, want %v", c.name, got, c.want)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				m.Match(data)
			}
		})
	}
}

func BenchmarkPathInt(b *testing.B) {
	msg := benchMessage(b)
	cases := []struct {
		name, path, msg string
		want            int64
	}{
		{"top level small message", "seq", `{"t":"event","seq":42,"data":{"px":1}}`, 42},
		{"last field of 1 KiB", "seq", string(msg), 1234567890123},
		{"nested", "data.seq", `{"t":"event","data":{"stream":"a","seq":42}}`, 42},
	}
	for _, c := range cases {
		p := mustPath(b, c.path)
		data := []byte(c.msg)
		if n, ok := p.Int(data); !ok || n != c.want {
			b.Fatalf("%s: Int = %d, %v; want %d", c.name, n, ok, c.want)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Int(data)
			}
		})
	}
}

func BenchmarkPathGet(b *testing.B) {
	p := mustPath(b, "session")
	data := []byte(`{"t":"welcome","session":"S-12345","seq":41}`)
	b.ReportAllocs()
	for b.Loop() {
		p.Get(data)
	}
}
