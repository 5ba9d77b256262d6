package rules

// maxDepth is the deepest nesting validJSON accepts, the same limit as
// encoding/json, so a pattern and a message agree on what is valid.
const maxDepth = 10000

// validator checks that a whole message is one JSON value (RFC 8259).
//
// It exists because gjson.Valid recurses once per nesting level: a 16 MiB
// message of '[' (within TETHER_MAX_MESSAGE_BYTES) overflows the goroutine
// stack and kills the process, and encoding/json.Valid, which is iterative,
// is several times slower. This one keeps its nesting in a fixed bitset on
// the stack and does not allocate.
type validator struct {
	s     string
	i     int
	depth int
	objs  [maxDepth/64 + 1]uint64 // bit d set: level d is an object, else an array
}

// validJSON reports whether s is exactly one JSON value, optionally
// surrounded by whitespace. Like encoding/json it does not check that
// strings are valid UTF-8.
func validJSON(s string) bool {
	v := validator{s: s}
	for {
		opened, ok := v.value()
		if !ok {
			return false
		}
		if opened {
			continue // a member or element comes next
		}
		more, ok := v.next()
		if !ok || !more {
			return ok
		}
	}
}

// value reads one value, or only the opening of a non-empty object or array
// (opened is true; for an object, its first key too).
func (v *validator) value() (opened, ok bool) {
	v.skipSpace()
	if v.i == len(v.s) {
		return false, false
	}
	switch c := v.s[v.i]; c {
	case '{', '[':
		return v.open(c == '{')
	case '"':
		return false, v.str()
	case 't':
		return false, v.literal("true")
	case 'f':
		return false, v.literal("false")
	case 'n':
		return false, v.literal("null")
	}
	return false, v.number()
}

func (v *validator) open(object bool) (opened, ok bool) {
	if v.depth == maxDepth {
		return false, false
	}
	d := v.depth
	v.objs[d/64] &^= 1 << (d % 64)
	if object {
		v.objs[d/64] |= 1 << (d % 64)
	}
	v.depth++
	v.i++
	v.skipSpace()
	if v.i < len(v.s) && (v.s[v.i] == '}' && object || v.s[v.i] == ']' && !object) {
		v.i++
		v.depth--
		return false, true // empty: a complete value
	}
	if object {
		return true, v.key()
	}
	return true, true
}

// next consumes what follows a complete value: closing brackets, then a
// comma (and the next key in an object) or the end of the input. more is
// true when another value follows.
func (v *validator) next() (more, ok bool) {
	for {
		v.skipSpace()
		if v.depth == 0 {
			return false, v.i == len(v.s)
		}
		if v.i == len(v.s) {
			return false, false
		}
		inObject := v.objs[(v.depth-1)/64]&(1<<((v.depth-1)%64)) != 0
		switch c := v.s[v.i]; {
		case c == ',':
			v.i++
			if inObject {
				return true, v.key()
			}
			return true, true
		case c == '}' && inObject, c == ']' && !inObject:
			v.i++
			v.depth--
		default:
			return false, false
		}
	}
}

// key reads an object key and its colon.
func (v *validator) key() bool {
	v.skipSpace()
	if v.i == len(v.s) || v.s[v.i] != '"' || !v.str() {
		return false
	}
	v.skipSpace()
	if v.i == len(v.s) || v.s[v.i] != ':' {
		return false
	}
	v.i++
	return true
}

// plain marks the bytes a string holds as they are: not a quote, a
// backslash or a control character. Skipping runs of them with one table
// lookup per byte is what keeps validation close to gjson's speed.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string starting at its opening quote.
func (v *validator) str() bool {
	s := v.s
	i := v.i + 1
	for {
		for i < len(s) && plain[s[i]] {
			i++
		}
		switch {
		case i == len(s) || s[i] < 0x20:
			return false
		case s[i] == '"':
			v.i = i + 1
			return true
		}
		n := escapeLen(s[i+1:])
		if n == 0 {
			return false
		}
		i += 1 + n
	}
}

// escapeLen returns how many bytes after a backslash form a valid escape,
// or 0.
func escapeLen(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(s) < 5 {
			return 0
		}
		for _, c := range []byte(s[1:5]) {
			if !isHex(c) {
				return 0
			}
		}
		return 5
	}
	return 0
}

func (v *validator) literal(word string) bool {
	if len(v.s)-v.i < len(word) || v.s[v.i:v.i+len(word)] != word {
		return false
	}
	v.i += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. What may
// follow (a delimiter) is next's concern, which rejects "01" and "1x".
func (v *validator) number() bool {
	s, i := v.s, v.i
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && isDigit(s[i]):
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		if i = skipDigits(s, i+1); !isDigit(s[i-1]) {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i = skipDigits(s, i); !isDigit(s[i-1]) {
			return false
		}
	}
	v.i = i
	return true
}

func (v *validator) skipSpace() {
	for v.i < len(v.s) {
		switch v.s[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

func isHex(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
