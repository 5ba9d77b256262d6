package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"regexp"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// refValue is a JSON value decoded by encoding/json, keeping object members
// in order and with duplicates, for the reference matcher below.
type refValue struct {
	kind byte // 's' string, 'n' number, 't' true, 'f' false, 'z' null, 'o' object, 'a' array
	str  string
	keys []string
	vals []refValue // object values (parallel to keys) or array elements
}

func refDecode(data []byte) (refValue, bool) {
	if !json.Valid(data) {
		return refValue{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := refRead(dec)
	return v, err == nil
}

func refRead(dec *json.Decoder) (refValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return refValue{}, err
	}
	switch tok := tok.(type) {
	case string:
		return refValue{kind: 's', str: tok}, nil
	case json.Number:
		return refValue{kind: 'n', str: string(tok)}, nil
	case bool:
		if tok {
			return refValue{kind: 't'}, nil
		}
		return refValue{kind: 'f'}, nil
	case nil:
		return refValue{kind: 'z'}, nil
	case json.Delim:
		return refReadContainer(dec, tok)
	}
	return refValue{}, errors.New("unexpected token")
}

func refReadContainer(dec *json.Decoder, open json.Delim) (refValue, error) {
	v := refValue{kind: 'a'}
	if open == '{' {
		v.kind = 'o'
	}
	for dec.More() {
		if v.kind == 'o' {
			k, err := dec.Token()
			if err != nil {
				return v, err
			}
			v.keys = append(v.keys, k.(string))
		}
		e, err := refRead(dec)
		if err != nil {
			return v, err
		}
		v.vals = append(v.vals, e)
	}
	_, err := dec.Token() // the closing delimiter
	return v, err
}

// refEqual is the package documentation's definition of equality written
// the slow, obvious way: big.Rat for numbers, first occurrence for keys.
func refEqual(p, m refValue) bool {
	if p.kind != m.kind {
		return false
	}
	switch p.kind {
	case 's':
		return p.str == m.str
	case 'n':
		a, _ := new(big.Rat).SetString(p.str)
		b, _ := new(big.Rat).SetString(m.str)
		return a.Cmp(b) == 0
	case 'o':
		return refContains(p, m)
	case 'a':
		if len(p.vals) != len(m.vals) {
			return false
		}
		for i := range p.vals {
			if !refEqual(p.vals[i], m.vals[i]) {
				return false
			}
		}
	}
	return true
}

func refContains(p, m refValue) bool {
	for i, k := range p.keys {
		j := -1
		for jj, mk := range m.keys {
			if mk == k {
				j = jj
				break
			}
		}
		if j < 0 || !refEqual(p.vals[i], m.vals[j]) {
			return false
		}
	}
	return true
}

// hugeExponent finds exponents big.Rat would take too long to expand; such
// inputs are left to the self-match property.
var hugeExponent = regexp.MustCompile(`[eE][+-]?0*[0-9]{4,}`)

func oracleApplies(pattern, msg string) bool {
	return utf8.ValidString(pattern) && utf8.ValidString(msg) &&
		!hugeExponent.MatchString(pattern) && !hugeExponent.MatchString(msg)
}

// FuzzMatch checks that Compile and Match never panic, that an object
// pattern always matches its own text, and that Match agrees with the
// reference matcher built on encoding/json. Two independent strings rarely
// make a pattern and a near-miss message, so the message is also turned
// into a pattern (which it must match) and then cut at a fuzzed place, which
// shortens arrays, objects, strings and numbers into near misses.
func FuzzMatch(f *testing.F) {
	seeds := [][2]string{
		{`{"op":"subscribe"}`, `{"op":"subscribe","channel":"a"}`},
		{`{"op":"a\u0062"}`, `{"\u006fp":"ab"}`},
		{`{"n":1}`, `{"n":1.0e0}`},
		{`{"a":{"b":[1,{"c":null}]}}`, `{"a":{"x":true,"b":[1,{"c":null,"d":false}]}}`},
		{`{"k":1}`, `{"k":2,"k":1}`},
		{`{}`, `[]`},
		{`re:^PING`, "PING\x00"},
		{`{"s":"\ud800"}`, `{"s":"\udc00"}`},
		{`{"a":[]}`, `{"a":[ ] , "b":"}"}`},
	}
	for i, s := range seeds {
		f.Add(s[0], s[1], uint16(i*3), uint8(i))
	}
	f.Fuzz(func(t *testing.T, pattern, msg string, cut uint16, n uint8) {
		if derived, ok := subsetPattern(t, msg); ok {
			k := int(cut) % (len(derived) + 1)
			checkAgainstReference(t, derived[:k]+derived[min(len(derived), k+int(n%8)):], msg)
		}
		checkAgainstReference(t, pattern, msg)
	})
}

func checkAgainstReference(t *testing.T, pattern, msg string) {
	m, err := Compile(pattern)
	if err != nil {
		if m != nil {
			t.Fatalf("Compile(%q) returned a Matcher with error %v", pattern, err)
		}
		return
	}
	got := m.Match([]byte(msg))
	if m.re != nil {
		return
	}
	if self := mustCompileOrNil(msg); self != nil && self.re == nil && !self.Match([]byte(msg)) {
		t.Fatalf("pattern %q does not match itself", msg)
	}
	if !oracleApplies(pattern, msg) {
		return
	}
	p, ok := refDecode([]byte(pattern))
	if !ok {
		t.Fatalf("Compile accepted %q, encoding/json cannot decode it", pattern)
	}
	mv, ok := refDecode([]byte(msg))
	want := ok && mv.kind == 'o' && refContains(p, mv)
	if got != want {
		t.Fatalf("Compile(%q).Match(%q) = %v, reference says %v", pattern, msg, got, want)
	}
}

// subsetPattern re-encodes a JSON object message as a pattern with every
// other top-level key dropped, duplicates dropped and strings re-escaped by
// encoding/json (which writes <, > and & as \u escapes): the message must
// match it.
func subsetPattern(t *testing.T, msg string) (string, bool) {
	if !utf8.ValidString(msg) || hugeExponent.MatchString(msg) {
		return "", false
	}
	mv, ok := refDecode([]byte(msg))
	if !ok || mv.kind != 'o' {
		return "", false
	}
	var b bytes.Buffer
	refEncode(&b, mv, true)
	m, err := Compile(b.String())
	if err != nil {
		t.Fatalf("pattern %q built from %q: %v", b.String(), msg, err)
	}
	if !m.Match([]byte(msg)) {
		t.Fatalf("%q does not match the pattern %q built from it", msg, b.String())
	}
	return b.String(), true
}

// refEncode writes v as JSON keeping the first occurrence of each key and,
// when thin is set, only every other top-level key.
func refEncode(b *bytes.Buffer, v refValue, thin bool) {
	switch v.kind {
	case 's':
		s, _ := json.Marshal(v.str)
		b.Write(s)
	case 'n':
		b.WriteString(v.str)
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case 'z':
		b.WriteString("null")
	case 'a':
		b.WriteByte('[')
		for i, e := range v.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			refEncode(b, e, false)
		}
		b.WriteByte(']')
	case 'o':
		refEncodeObject(b, v, thin)
	}
}

func refEncodeObject(b *bytes.Buffer, v refValue, thin bool) {
	b.WriteByte('{')
	seen := map[string]bool{}
	wrote := false
	for i, k := range v.keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if thin && i%2 == 1 {
			continue
		}
		if wrote {
			b.WriteByte(',')
		}
		wrote = true
		key, _ := json.Marshal(k)
		b.Write(key)
		b.WriteByte(':')
		refEncode(b, v.vals[i], false)
	}
	b.WriteByte('}')
}

func mustCompileOrNil(pattern string) *Matcher {
	m, err := Compile(pattern)
	if err != nil {
		return nil
	}
	return m
}

// FuzzPath checks that ParsePath, Get and Int never panic, that a parsed
// path prints as given, and that Int agrees with an exact big.Rat reading of
// the number Get finds.
func FuzzPath(f *testing.F) {
	seeds := [][2]string{
		{"seq", `{"seq":42}`},
		{"data.seq", `{"data":{"seq":4.2e1}}`},
		{"params.0", `{"params":[9223372036854775807]}`},
		{`friends.#(last=="Murphy").age`, `{"friends":[{"last":"Murphy","age":-9223372036854775808}]}`},
		{"a.#", `{"a":[1,2]}`},
		{"a..b", `{}`},
		{"seq", `{"seq":1e19}`},
		{"seq", `{"seq":"7"}`},
	}
	for _, s := range seeds {
		f.Add(s[0], []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, path string, data []byte) {
		p, err := ParsePath(path)
		if err != nil {
			return
		}
		if p.String() != path {
			t.Fatalf("ParsePath(%q).String() = %q", path, p.String())
		}
		r := p.Get(data)
		n, ok := p.Int(data)
		if hugeExponent.MatchString(r.Raw) {
			return
		}
		want, wantOK := refInt(r.Type == gjson.Number, r.Raw)
		if r.Type == gjson.String {
			want, wantOK = refQuotedInt(r.Str)
		}
		if ok != wantOK || n != want {
			t.Fatalf("Int(%q) on %q = %d, %v; Get found %q, so want %d, %v", path, data, n, ok, r.Raw, want, wantOK)
		}
	})
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

var (
	minInt64 = big.NewInt(-1 << 63)
	maxInt64 = big.NewInt(1<<63 - 1)
)

// refInt is Path.Int's contract computed with big.Rat.
func refInt(isNumber bool, raw string) (int64, bool) {
	if !isNumber || !jsonNumber.MatchString(raw) {
		return 0, false
	}
	r, ok := new(big.Rat).SetString(raw)
	if !ok || !r.IsInt() {
		return 0, false
	}
	i := r.Num()
	if i.Cmp(minInt64) < 0 || i.Cmp(maxInt64) > 0 {
		return 0, false
	}
	return i.Int64(), true
}

var quotedInt = regexp.MustCompile(`^-?[0-9]+$`)

// refQuotedInt is Path.Int's contract for a JSON string, computed with big.Int.
func refQuotedInt(s string) (int64, bool) {
	if !quotedInt.MatchString(s) {
		return 0, false
	}
	i, ok := new(big.Int).SetString(s, 10)
	if !ok || i.Cmp(minInt64) < 0 || i.Cmp(maxInt64) > 0 {
		return 0, false
	}
	return i.Int64(), true
}

// FuzzDecimal checks the exact number comparison against big.Rat.
func FuzzDecimal(f *testing.F) {
	for _, s := range [][2]string{{"1", "1.0"}, {"10.05", "1005e-2"}, {"-0", "0e7"}, {"9007199254740993", "9007199254740992"}, {"01", "1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		da, okA := parseDecimal(a)
		db, okB := parseDecimal(b)
		if hugeExponent.MatchString(a) || hugeExponent.MatchString(b) {
			return
		}
		if okA != jsonNumber.MatchString(a) || okB != jsonNumber.MatchString(b) {
			t.Fatalf("parseDecimal ok = %v, %v for %q, %q; grammar says %v, %v",
				okA, okB, a, b, jsonNumber.MatchString(a), jsonNumber.MatchString(b))
		}
		if !okA || !okB {
			return
		}
		ra, _ := new(big.Rat).SetString(a)
		rb, _ := new(big.Rat).SetString(b)
		if got, want := da.equal(db), ra.Cmp(rb) == 0; got != want {
			t.Fatalf("%s == %s: got %v, want %v", a, b, got, want)
		}
	})
}
