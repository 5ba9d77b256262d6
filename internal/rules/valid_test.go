package rules

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidJSON(t *testing.T) {
	valid := []string{
		`{}`, ` {} `, "\t[\n]\r", `0`, `-0`, `1.5e+10`, `-12.0E-3`, `"a"`, `"\u00e9\n\"\\\/"`, `true`, `false`, `null`,
		`{"a":[1,{"b":null},[]],"c":{"d":"e"}}`, `[ 1 , 2 ]`, `{ "a" : 1 , "b" : 2 }`, "\"\xff\"",
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
	}
	invalid := []string{
		``, ` `, `{`, `}`, `[`, `]`, `{]`, `[}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`,
		`{a:1}`, `{"a" 1}`, `{"a":1 "b":2}`, `[1 2]`, `01`, `1.`, `.1`, `1e`, `1e+`, `+1`, `-`, `--1`, `0x1`,
		`NaN`, `tru`, `nul`, `falsey`, `"a`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\nb\"", `1 2`, `{}{}`, `{} x`,
		`'a'`, "\xef\xbb\xbf{}",
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	}
	for _, s := range valid {
		if !validJSON(s) {
			t.Errorf("validJSON(%.40q) = false, want true", s)
		}
	}
	for _, s := range invalid {
		if validJSON(s) {
			t.Errorf("validJSON(%.40q) = true, want false", s)
		}
	}
	for _, s := range append(valid, invalid...) {
		if validJSON(s) != json.Valid([]byte(s)) {
			t.Errorf("validJSON(%.40q) disagrees with encoding/json", s)
		}
	}
}

// TestDeepMessage sends the nesting that overflows gjson.Valid's recursion
// (and would crash the process) through every entry point that reads
// messages. The size is the default TETHER_MAX_MESSAGE_BYTES.
func TestDeepMessage(t *testing.T) {
	const size = 16 << 20
	prefix := `{"op":"sub","seq":1,"x":`
	msg := []byte(prefix + strings.Repeat("[", size-len(prefix)))
	if mustCompile(t, `{"op":"sub"}`).Match(msg) {
		t.Error("a truncated, deeply nested message matched")
	}
	if n, ok := mustPath(t, "seq").Int(msg); !ok || n != 1 {
		t.Errorf("Int = %d, %v; want 1, true", n, ok)
	}
	// Paths do not validate; reaching here without a crash is the point.
	mustPath(t, "x.0.0.0.0").Get(msg)
}

// FuzzValid checks validJSON against encoding/json.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}]}`, `[1,]`, `"\u00e9"`, `-0.5e-3`, `01`, "\"\xff\"", `{"a" : 1 }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(string(data)), json.Valid(data); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	msg := string(benchMessage(b))
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		validJSON(msg)
	}
}
