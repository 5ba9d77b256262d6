package rules

import (
	"errors"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"
)

func mustCompile(t testing.TB, pattern string) *Matcher {
	t.Helper()
	m, err := Compile(pattern)
	if err != nil {
		t.Fatalf("Compile(%q): %v", pattern, err)
	}
	return m
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		msg     string
		want    bool
	}{
		{"equal field", `{"op":"subscribe"}`, `{"op":"subscribe","channel":"a"}`, true},
		{"field not first", `{"op":"subscribe"}`, `{"channel":"a","op":"subscribe"}`, true},
		{"different value", `{"op":"subscribe"}`, `{"op":"unsubscribe"}`, false},
		{"prefix value", `{"op":"sub"}`, `{"op":"subscribe"}`, false},
		{"missing field", `{"op":"subscribe"}`, `{"channel":"a"}`, false},
		{"all fields required", `{"t":"ack","id":"m1"}`, `{"t":"ack","id":"m2"}`, false},
		{"several fields any order", `{"t":"ack","id":"m1"}`, `{"id":"m1","x":[1,{"t":"no"}],"t":"ack"}`, true},
		{"surrounding whitespace", `{"op":"sub"}`, " \r\n\t{ \"op\" : \"sub\" }\n", true},
		{"pattern whitespace", " { \"op\" :\n\"sub\" } ", `{"op":"sub"}`, true},
		{"field name is not a value", `{"op":"sub"}`, `{"sub":"op"}`, false},
		{"nested field does not count at top", `{"op":"sub"}`, `{"data":{"op":"sub"}}`, false},

		{"escaped message value", `{"op":"ab"}`, `{"op":"a\u0062"}`, true},
		{"escaped pattern value", `{"op":"a\u0062"}`, `{"op":"ab"}`, true},
		{"escaped message key", `{"op":"ab"}`, `{"\u006fp":"ab"}`, true},
		{"escaped slash", `{"p":"a/b"}`, `{"p":"a\/b"}`, true},
		{"escaped quote", `{"p":"say \"hi\""}`, `{"p":"say \u0022hi\u0022"}`, true},
		{"surrogate pair", `{"e":"😀"}`, `{"e":"\ud83d\ude00"}`, true},
		{"case matters", `{"op":"Sub"}`, `{"op":"sub"}`, false},

		{"integer equals float", `{"n":1}`, `{"n":1.0}`, true},
		{"float equals integer", `{"n":1.000}`, `{"n":1}`, true},
		{"exponent", `{"n":100}`, `{"n":1e2}`, true},
		{"negative exponent", `{"n":0.1}`, `{"n":1E-1}`, true},
		{"upper exponent sign", `{"n":10E-1}`, `{"n":1}`, true},
		{"negative zero", `{"n":0}`, `{"n":-0.0}`, true},
		{"sign matters", `{"n":1}`, `{"n":-1}`, false},
		{"number is not a string", `{"n":1}`, `{"n":"1"}`, false},
		{"string is not a number", `{"n":"1"}`, `{"n":1}`, false},
		{"beyond float64 precision", `{"id":9007199254740993}`, `{"id":9007199254740992}`, false},
		{"big integers equal", `{"id":123456789012345678901234567890}`, `{"id":1.2345678901234567890123456789e29}`, true},
		{"huge exponent same text", `{"n":1e9999999999999}`, `{"n":1e9999999999999}`, true},
		{"huge exponent other text", `{"n":1e9999999999999}`, `{"n":10e9999999999998}`, false},

		{"true", `{"ok":true}`, `{"ok":true}`, true},
		{"true is not 1", `{"ok":true}`, `{"ok":1}`, false},
		{"true is not a string", `{"ok":true}`, `{"ok":"true"}`, false},
		{"false", `{"ok":false}`, `{"ok":false}`, true},
		{"false is not null", `{"ok":false}`, `{"ok":null}`, false},
		{"null", `{"x":null}`, `{"x":null}`, true},
		{"missing is not null", `{"x":null}`, `{"y":1}`, false},
		{"null is not false", `{"x":null}`, `{"x":false}`, false},

		{"nested containment", `{"data":{"t":"a"}}`, `{"data":{"x":1,"t":"a"},"y":2}`, true},
		{"nested missing", `{"data":{"t":"a"}}`, `{"data":{"x":1}}`, false},
		{"nested not an object", `{"data":{"t":"a"}}`, `{"data":"t"}`, false},
		{"nested array is not an object", `{"data":{"t":"a"}}`, `{"data":[{"t":"a"}]}`, false},
		{"empty nested object", `{"data":{}}`, `{"data":{"a":1}}`, true},
		{"empty nested object needs object", `{"data":{}}`, `{"data":[]}`, false},
		{"deep nesting", `{"a":{"b":{"c":{"d":[1]}}}}`, `{"a":{"z":0,"b":{"c":{"d":[1.0],"e":2}}}}`, true},

		{"array equal", `{"args":[1,"a",null]}`, `{"args":[1,"a",null]}`, true},
		{"array longer", `{"args":[1,"a"]}`, `{"args":[1,"a",2]}`, false},
		{"array shorter", `{"args":[1,"a"]}`, `{"args":[1]}`, false},
		{"array order", `{"args":[1,"a"]}`, `{"args":["a",1]}`, false},
		{"array whitespace", `{"args":[1,"a"]}`, `{"args":[ 1 , "a" ]}`, true},
		{"empty array", `{"args":[]}`, `{"args":[ ]}`, true},
		{"empty array is not non-empty", `{"args":[]}`, `{"args":[0]}`, false},
		{"array is not an object", `{"args":[]}`, `{"args":{}}`, false},
		{"object in array by containment", `{"a":[{"b":1}]}`, `{"a":[{"c":2,"b":1}]}`, true},
		{"nested arrays", `{"a":[[1],[]]}`, `{"a":[[1],[]]}`, true},

		{"duplicate key first wins", `{"op":"sub"}`, `{"op":"sub","op":"unsub"}`, true},
		{"duplicate key first loses", `{"op":"sub"}`, `{"op":"unsub","op":"sub"}`, false},
		{"duplicate nested key first wins", `{"d":{"k":1}}`, `{"d":{"k":1,"k":2}}`, true},

		{"empty pattern matches any object", `{}`, `{"a":1}`, true},
		{"empty pattern matches empty object", `{}`, ` {} `, true},
		{"empty pattern needs an object", `{}`, `[]`, false},

		{"not JSON", `{"op":"sub"}`, `op=sub`, false},
		{"empty message", `{"op":"sub"}`, ``, false},
		{"whitespace message", `{}`, "  \n", false},
		{"binary data", `{}`, "\x00\xff\x7b\x7d", false},
		{"top-level array", `{"op":"sub"}`, `[{"op":"sub"}]`, false},
		{"top-level string", `{}`, `"{}"`, false},
		{"truncated after match", `{"op":"sub"}`, `{"op":"sub","x":[1,`, false},
		{"malformed after match", `{"op":"sub"}`, `{"op":"sub","x":[1,}]}`, false},
		{"trailing garbage", `{"op":"sub"}`, `{"op":"sub"}x`, false},
		{"two objects", `{"op":"sub"}`, `{"op":"sub"}{"op":"sub"}`, false},
		{"unquoted key", `{"op":"sub"}`, `{op:"sub"}`, false},
		{"control character in string", `{"op":"sub"}`, "{\"op\":\"sub\",\"x\":\"a\nb\"}", false},
		{"invalid UTF-8 kept byte for byte", `{"s":"\u00ff"}`, "{\"s\":\"\xff\"}", false},

		{"regexp on text", `re:^PING \d+$`, `PING 42`, true},
		{"regexp anchored", `re:^PING`, `xPING`, false},
		{"regexp on raw JSON", `re:"op":\s*"sub"`, `{"op": "sub"}`, true},
		{"regexp on binary", `re:\x00\x01`, "\xff\x00\x01", true},
		{"regexp on empty message", `re:^$`, ``, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustCompile(t, tt.pattern)
			if got := m.Match([]byte(tt.msg)); got != tt.want {
				t.Errorf("Compile(%#q).Match(%#q) = %v, want %v", tt.pattern, tt.msg, got, tt.want)
			}
		})
	}
}

func TestMatchManyPatternFields(t *testing.T) {
	var p, msg strings.Builder
	p.WriteString("{")
	msg.WriteString(`{"extra":0`)
	for i := range 70 {
		if i > 0 {
			p.WriteString(",")
		}
		key := `"k` + strings.Repeat("x", i) + `"`
		p.WriteString(key + ":1")
		msg.WriteString("," + key + ":1")
	}
	p.WriteString("}")
	m := mustCompile(t, p.String())
	full := msg.String() + "}"
	if !m.Match([]byte(full)) {
		t.Error("70-field pattern does not match a message holding every field")
	}
	missingLast := strings.Replace(full, `"k`+strings.Repeat("x", 69)+`"`, `"other"`, 1)
	if m.Match([]byte(missingLast)) {
		t.Error("70-field pattern matches a message missing one field")
	}
	dupFirst := strings.Replace(full, `{"extra":0`, `{"k":2`, 1)
	if m.Match([]byte(dupFirst)) {
		t.Error("a duplicated key's later occurrence was used instead of its first")
	}
}

func TestNilAndZeroMatcher(t *testing.T) {
	var nilM *Matcher
	if nilM.Match([]byte(`{}`)) || nilM.String() != "" {
		t.Error("nil *Matcher must match nothing and print as empty")
	}
	var zero Matcher
	if zero.Match([]byte(`{}`)) {
		t.Error("zero Matcher matches {}: an unset rule would fire on every object")
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		pattern string
		want    string
	}{
		{``, `pattern is empty`},
		{" \n\t", `pattern is empty`},
		{`subscribe`, `pattern must be a JSON object or start with "re:"`},
		{`[{"op":"sub"}]`, `pattern must be a JSON object or start with "re:"`},
		{`"op"`, `pattern must be a JSON object or start with "re:"`},
		{` re:^x`, `pattern must be a JSON object or start with "re:"`},
		{`RE:^x`, `pattern must be a JSON object or start with "re:"`},
		{`{"op":}`, `invalid JSON at offset 6: invalid character '}' looking for beginning of value`},
		{`{"op":"sub"`, `invalid JSON at offset 11: unexpected end of JSON input`},
		{`{"op":"sub"} x`, `invalid JSON at offset 13: invalid character 'x' after top-level value`},
		{`{op:"sub"}`, `invalid JSON at offset 1: invalid character 'o' looking for beginning of object key string`},
		{`{"a":1,"a":2}`, `duplicate key "a"`},
		{`{"a":1,"\u0061":2}`, `duplicate key "a"`},
		{`{"x":{"b":1,"b":1}}`, `duplicate key "b"`},
		{`{"x":[{"b":1,"b":1}]}`, `duplicate key "b"`},
		{`re:`, `empty regular expression after "re:"`},
		{`re:(`, "error parsing regexp: missing closing ): `(`"},
		{`re:a**`, "error parsing regexp: invalid nested repetition operator: `**`"},
	}
	for _, tt := range tests {
		m, err := Compile(tt.pattern)
		if err == nil {
			t.Errorf("Compile(%#q) = %v, want error %q", tt.pattern, m, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Compile(%#q) error\n got %q\nwant %q", tt.pattern, err, tt.want)
		}
	}
	_, err := Compile(`re:(`)
	if _, ok := errors.AsType[*syntax.Error](err); !ok {
		t.Errorf("regexp error %T is not a *syntax.Error", err)
	}
}

func TestMatcherText(t *testing.T) {
	for _, p := range []string{`{"op":"sub"}`, ` {"a" : [1, 2]} `, `re:^PING`} {
		var m Matcher
		if err := m.UnmarshalText([]byte(p)); err != nil {
			t.Fatalf("UnmarshalText(%#q): %v", p, err)
		}
		if m.String() != p {
			t.Errorf("String() = %#q, want the original %#q", m.String(), p)
		}
	}
	m := mustCompile(t, `{"op":"sub"}`)
	if err := m.UnmarshalText([]byte(`{`)); err == nil {
		t.Error("UnmarshalText accepted invalid JSON")
	}
	if m.String() != `{"op":"sub"}` || !m.Match([]byte(`{"op":"sub"}`)) {
		t.Error("failed UnmarshalText changed the Matcher")
	}
}

// TestEnvParsing checks the configuration path the proxy relies on:
// caarlos0/env fills *Matcher and Path fields through UnmarshalText and
// leaves unset optional rules nil.
func TestEnvParsing(t *testing.T) {
	type config struct {
		Subscribe *Matcher `env:"SUBSCRIBE_MATCH"`
		Confirm   *Matcher `env:"CONFIRM_MATCH"`
		Seq       Path     `env:"SEQ_PATH"`
	}
	cfg, err := env.ParseAsWithOptions[config](env.Options{
		Prefix:      "TETHER_",
		Environment: map[string]string{"TETHER_SUBSCRIBE_MATCH": `{"t":"sub"}`, "TETHER_SEQ_PATH": "data.seq"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Subscribe.Match([]byte(`{"t":"sub","channel":"a"}`)) {
		t.Error("parsed TETHER_SUBSCRIBE_MATCH does not match a subscribe")
	}
	if cfg.Confirm != nil || cfg.Confirm.Match([]byte(`{}`)) {
		t.Error("unset TETHER_CONFIRM_MATCH is not a nil Matcher")
	}
	if n, ok := cfg.Seq.Int([]byte(`{"data":{"seq":7}}`)); !ok || n != 7 {
		t.Errorf("parsed TETHER_SEQ_PATH reads %d, %v; want 7, true", n, ok)
	}

	_, err = env.ParseAsWithOptions[config](env.Options{
		Prefix:      "TETHER_",
		Environment: map[string]string{"TETHER_SUBSCRIBE_MATCH": `subscribe`, "TETHER_SEQ_PATH": "a..b"},
	})
	for _, want := range []string{`pattern must be a JSON object or start with "re:"`, `path has an empty component at offset 2`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("env error %v does not mention %q", err, want)
		}
	}
}
