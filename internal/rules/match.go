package rules

import (
	"errors"
	"regexp"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// regexpPrefix marks a pattern as a regular expression on the raw message.
const regexpPrefix = "re:"

// Matcher is a compiled message rule (TETHER_*_MATCH). It is immutable after
// Compile and safe for concurrent use.
//
// The zero Matcher, like a nil *Matcher, matches nothing: an unset optional
// rule must never fire.
type Matcher struct {
	pattern string
	re      *regexp.Regexp // set for "re:" patterns
	fields  []field        // the top-level fields of a JSON pattern
	isJSON  bool           // distinguishes the pattern {} from the zero Matcher
}

// Compile parses a rule: a JSON object (a containment pattern) or "re:"
// followed by a Go regular expression. See the package documentation for
// what each matches.
func Compile(pattern string) (*Matcher, error) {
	if rest, ok := strings.CutPrefix(pattern, regexpPrefix); ok {
		return compileRegexp(pattern, rest)
	}
	if strings.Trim(pattern, jsonSpace) == "" {
		return nil, errors.New("pattern is empty")
	}
	fields, err := compileObject(pattern)
	if err != nil {
		return nil, err
	}
	return &Matcher{pattern: pattern, fields: fields, isJSON: true}, nil
}

func compileRegexp(pattern, expr string) (*Matcher, error) {
	if expr == "" {
		return nil, errors.New(`empty regular expression after "re:"`)
	}
	// The regexp error names the problem and the offending text itself
	// ("error parsing regexp: missing closing ): `(a`").
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	return &Matcher{pattern: pattern, re: re}, nil
}

// Match reports whether data, a whole text or binary message, matches.
// A nil or zero Matcher matches nothing.
func (m *Matcher) Match(data []byte) bool {
	switch {
	case m == nil:
		return false
	case m.re != nil:
		return m.re.Match(data)
	case !m.isJSON:
		return false
	}
	s := bytesString(data)
	obj, ok := topObject(s)
	// Validation runs last and only on a candidate match: a message that
	// fails containment does not match whether or not it is valid JSON, so
	// the common non-matching message costs one partial scan, not two.
	return ok && contains(m.fields, obj) && validJSON(s)
}

// String returns the pattern as given to Compile.
func (m *Matcher) String() string {
	if m == nil {
		return ""
	}
	return m.pattern
}

// UnmarshalText implements encoding.TextUnmarshaler, so configuration
// parsers (caarlos0/env) can fill a *Matcher field directly.
func (m *Matcher) UnmarshalText(b []byte) error {
	c, err := Compile(string(b))
	if err != nil {
		return err
	}
	*m = *c
	return nil
}

// topObject returns the message as a gjson object when its first
// non-whitespace byte opens one: anything else (arrays, scalars, binary
// frames, other protocols) is rejected without scanning further.
func topObject(s string) (gjson.Result, bool) {
	i := 0
	for i < len(s) && strings.IndexByte(jsonSpace, s[i]) >= 0 {
		i++
	}
	if i == len(s) || s[i] != '{' {
		return gjson.Result{}, false
	}
	return gjson.Result{Type: gjson.JSON, Raw: s[i:]}, true
}

// contains reports whether obj holds every field with an equal value. It
// walks obj once, stopping as soon as the answer is known, rather than
// looking each field up with its own scan. Only the first occurrence of a
// duplicated key counts, as with gjson.Get.
func contains(fields []field, obj gjson.Result) bool {
	seen := newSeenSet(len(fields))
	matched, ok := 0, true
	obj.ForEach(func(k, v gjson.Result) bool {
		i := lookup(fields, k.Str)
		if i < 0 || !seen.add(i) {
			return true
		}
		if !equal(&fields[i].val, v) {
			ok = false
			return false
		}
		matched++
		return matched < len(fields)
	})
	return ok && matched == len(fields)
}

func lookup(fields []field, key string) int {
	for i := range fields {
		if fields[i].key == key {
			return i
		}
	}
	return -1
}

// equal compares a message value with a pattern node. Objects nested
// anywhere, inside arrays too, are compared by containment.
func equal(n *node, v gjson.Result) bool {
	switch n.kind {
	case kindString:
		// gjson has already unescaped v.Str, allocating only when the token
		// holds escapes; without them it is a view into the message.
		return v.Type == gjson.String && v.Str == n.str
	case kindNumber:
		return v.Type == gjson.Number && numberEqual(n, v.Raw)
	case kindTrue:
		return v.Type == gjson.True
	case kindFalse:
		return v.Type == gjson.False
	case kindNull:
		return v.Type == gjson.Null && v.Raw != ""
	case kindObject:
		return v.IsObject() && contains(n.fields, v)
	default:
		return v.IsArray() && elemsEqual(n.elems, v)
	}
}

// elemsEqual requires the same length and pairwise equal elements: a
// pattern array is a value, not a set of required members.
func elemsEqual(elems []node, arr gjson.Result) bool {
	i, ok := 0, true
	arr.ForEach(func(_, v gjson.Result) bool {
		if i >= len(elems) || !equal(&elems[i], v) {
			ok = false
			return false
		}
		i++
		return true
	})
	return ok && i == len(elems)
}

func numberEqual(n *node, raw string) bool {
	d, ok := parseDecimal(raw)
	if !ok || !n.numOK {
		return raw == n.str
	}
	return d.equal(n.num)
}

// seenSet records which pattern fields were already met in a message. It
// avoids allocating for objects of up to 64 pattern fields.
type seenSet struct {
	bits uint64
	more []bool
}

func newSeenSet(n int) seenSet {
	if n > 64 {
		return seenSet{more: make([]bool, n)}
	}
	return seenSet{}
}

// add marks i and reports whether it was new.
func (s *seenSet) add(i int) bool {
	if s.more != nil {
		was := s.more[i]
		s.more[i] = true
		return !was
	}
	was := s.bits&(1<<i) != 0
	s.bits |= 1 << i
	return !was
}

// bytesString views b as a string without copying. Match only reads the
// message and keeps nothing derived from it after returning, so the view
// never outlives the caller's buffer.
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
