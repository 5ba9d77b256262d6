package rules

import (
	"math"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

func mustPath(t testing.TB, s string) Path {
	t.Helper()
	p, err := ParsePath(s)
	if err != nil {
		t.Fatalf("ParsePath(%q): %v", s, err)
	}
	return p
}

func TestParsePath(t *testing.T) {
	valid := []string{
		"seq", "data.seq", "params.0", `a\.b`, "#", "friends.#",
		`friends.#(last=="Murphy").first`, `friends.#(nets.#(=="fb"))#.first`,
		`friends.#(last=="a.b|c").first`, `friends.#(last=="x\")").first`,
		"children|@reverse|0", "{a,b.c}", "[a,b]", "@this", `@join:{"preserve":true}`,
		"first name", "é.ü", "a*", "a?c",
	}
	for _, s := range valid {
		p, err := ParsePath(s)
		if err != nil {
			t.Errorf("ParsePath(%q): %v", s, err)
			continue
		}
		if p.String() != s {
			t.Errorf("ParsePath(%q).String() = %q", s, p.String())
		}
	}
	invalid := []struct{ path, want string }{
		{"", "path is empty"},
		{" seq", "path has a leading or trailing space"},
		{"seq ", "path has a leading or trailing space"},
		{"a\tb", "path has a control character at offset 1"},
		{"seq\n", "path has a control character at offset 3"},
		{"a\x7f", "path has a control character at offset 1"},
		{"a\xffb", "path is not valid UTF-8"},
		{"a..b", "path has an empty component at offset 2"},
		{".a", "path has an empty component at offset 0"},
		{"a.", "path has an empty component at offset 2"},
		{"a|", "path has an empty component at offset 2"},
		{"a.|b", "path has an empty component at offset 2"},
		{`a\`, "path ends with an escape character"},
		{"#(a==1", `path is missing a closing ')'`},
		{"a)", `path has an unexpected ')' at offset 1`},
		{"#(a==1]", `path has an unexpected ']' at offset 6`},
		{`#(a=="b)`, "path has an unterminated string"},
	}
	for _, tt := range invalid {
		_, err := ParsePath(tt.path)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParsePath(%q) error %v, want %q", tt.path, err, tt.want)
		}
	}
}

func TestPathGet(t *testing.T) {
	tests := []struct {
		path, msg string
		want      string // Raw of the result; "" means absent
	}{
		{"seq", `{"seq":5}`, "5"},
		{"data.seq", `{"data":{"seq":5}}`, "5"},
		{"params.0", `{"params":["a","b"]}`, `"a"`},
		{"params.1", `{"params":["a","b"]}`, `"b"`},
		{"params.2", `{"params":["a","b"]}`, ""},
		{"missing", `{"seq":5}`, ""},
		{`a\.b`, `{"a.b":1,"a":{"b":2}}`, "1"},
		{"k", `{"k":"first","k":"second"}`, `"first"`},
		{"\u00e9", `{"\u00e9":1}`, "1"},
		{"seq", `not json`, ""},
		{"seq", ``, ""},
		{"0", `[7]`, "7"},
	}
	for _, tt := range tests {
		r := mustPath(t, tt.path).Get([]byte(tt.msg))
		if r.Raw != tt.want || r.Exists() != (tt.want != "") {
			t.Errorf("Get(%q) on %#q = %#q (exists %v), want %#q", tt.path, tt.msg, r.Raw, r.Exists(), tt.want)
		}
	}

	// The proxy keeps captured values (a session id) while it reuses its
	// read buffers: the Result must not alias the message.
	data := []byte(`{"session":"abc"}`)
	r := mustPath(t, "session").Get(data)
	copy(data, `{"session":"xyz"}`)
	if r.Str != "abc" || r.Raw != `"abc"` {
		t.Errorf("Get result changed with its message: Str %q, Raw %q", r.Str, r.Raw)
	}

	var zero Path
	if zero.Get([]byte(`{"":1}`)).Exists() || zero.String() != "" {
		t.Error("zero Path selects something")
	}
}

func TestPathInt(t *testing.T) {
	tests := []struct {
		msg    string
		want   int64
		wantOK bool
	}{
		{`{"seq":42}`, 42, true},
		{`{"seq":-7}`, -7, true},
		{`{"seq":0}`, 0, true},
		{`{"seq":-0}`, 0, true},
		{`{"seq":42.0}`, 42, true},
		{`{"seq":4.2e1}`, 42, true},
		{`{"seq":4200E-2}`, 42, true},
		{`{"seq":0.0001e4}`, 1, true},
		{`{"seq":0e999}`, 0, true},
		{`{"seq":1E+2}`, 100, true},
		{`{"seq":9007199254740993}`, 9007199254740993, true},
		{`{"seq":9223372036854775807}`, math.MaxInt64, true},
		{`{"seq":-9223372036854775808}`, math.MinInt64, true},
		{`{"seq":92233720368547758.07e2}`, math.MaxInt64, true},
		{`{"seq":12345678901234567890e-1}`, 1234567890123456789, true},
		{`{"seq":9223372036854775808}`, 0, false},
		{`{"seq":-9223372036854775809}`, 0, false},
		{`{"seq":1e19}`, 0, false},
		{`{"seq":1e9999999999999}`, 0, false},
		{`{"seq":42.5}`, 0, false},
		{`{"seq":1e-1}`, 0, false},
		{`{"seq":123456789012345678901e-2}`, 0, false},
		{`{"seq":"42"}`, 42, true},
		{`{"seq":"-7"}`, -7, true},
		{`{"seq":"9223372036854775807"}`, 9223372036854775807, true},
		{`{"seq":"9223372036854775808"}`, 0, false},
		{`{"seq":"+42"}`, 0, false},
		{`{"seq":" 42"}`, 0, false},
		{`{"seq":"4.2e1"}`, 0, false},
		{`{"seq":""}`, 0, false},
		{`{"seq":"-"}`, 0, false},
		{`{"seq":"4\u0032"}`, 42, true},
		{`{"seq":true}`, 0, false},
		{`{"seq":null}`, 0, false},
		{`{"seq":{"n":1}}`, 0, false},
		{`{"seq":[1]}`, 0, false},
		{`{"other":1}`, 0, false},
		{`{"seq":+1}`, 0, false},
		{`{"seq":01}`, 0, false},
		{`{"seq":NaN}`, 0, false},
		{`[1]`, 0, false},
		{`garbage`, 0, false},
	}
	p := mustPath(t, "seq")
	for _, tt := range tests {
		got, ok := p.Int([]byte(tt.msg))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Int on %#q = %d, %v; want %d, %v", tt.msg, got, ok, tt.want, tt.wantOK)
		}
	}
	if n, ok := mustPath(t, "data.seq").Int([]byte(`{"data":{"seq":3}}`)); !ok || n != 3 {
		t.Errorf("nested Int = %d, %v; want 3, true", n, ok)
	}
	if n, ok := mustPath(t, "a.#").Int([]byte(`{"a":[1,2,3]}`)); !ok || n != 3 {
		t.Errorf("Int of an array count = %d, %v; want 3, true", n, ok)
	}
	var zero Path
	if _, ok := zero.Int([]byte(`{"":1}`)); ok {
		t.Error("zero Path yields an integer")
	}
}

func TestPathText(t *testing.T) {
	var p Path
	if err := p.UnmarshalText([]byte("data.seq")); err != nil || p.String() != "data.seq" {
		t.Fatalf("UnmarshalText = %q, %v", p.String(), err)
	}
	if err := p.UnmarshalText([]byte("")); err == nil {
		t.Error("UnmarshalText accepted an empty path")
	}
	if p.String() != "data.seq" {
		t.Error("failed UnmarshalText changed the Path")
	}
}

// TestPathMatchesGJSON checks that validation only rejects and never
// changes what a path selects.
func TestPathMatchesGJSON(t *testing.T) {
	msg := `{"friends":[{"first":"Dale","last":"Murphy","age":44},{"first":"Roger","last":"Craig","age":68}]}`
	for _, s := range []string{`friends.#(last=="Murphy").first`, "friends.#.age", "friends|@reverse|0.first", "friends.1.age"} {
		got := mustPath(t, s).Get([]byte(msg))
		if want := gjson.Get(msg, s); got.Raw != want.Raw {
			t.Errorf("Get(%q) = %s, gjson.Get = %s", s, got.Raw, want.Raw)
		}
	}
	if n, ok := mustPath(t, "friends.1.age").Int([]byte(msg)); !ok || strconv.FormatInt(n, 10) != "68" {
		t.Errorf("Int = %d, %v; want 68", n, ok)
	}
}
