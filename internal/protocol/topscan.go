package protocol

import (
	"strings"

	"github.com/tidwall/gjson"
)

// topScan reads the values of a few top-level keys of a JSON object in one
// pass, without a callback per key and without converting numbers: the
// per-message cost of the rules when every configured path is a plain key
// (seq, channel, id: the usual case).
//
// Why not gjson, which the rules use everywhere else (STYLE.md: don't
// hand-write what a library does)? gjson offers either a lookup per path
// (gjson.Get, gjson.GetMany: one scan each, and a missing key scans the
// whole message every time) or Result.ForEach, which calls back for every
// key and parses every number it passes into a float64 whether anyone
// wants it or not. Measured on a 2-core EPYC VM with go1.26: reading
// the number of a 64-byte event took 132 ns with ForEach and takes
// 49 ns (BenchmarkFieldReader); of a 1 KiB event with the number after the
// payload, 281 ns and 105 ns; the docs/design.md example's sequence rules on a
// 1 KiB event, 428 ns and 220 ns (BenchmarkClassify, which also runs two
// Matches); all without allocating. It is narrow on purpose: it decides
// only what it reads exactly as gjson would, and reports anything else (an
// escaped key, a malformed structure, a number JSON does not allow) as not
// understood, so the caller asks gjson. FuzzFieldReader holds it to
// gjson's answers.
type topScan struct {
	keys []string // the keys wanted; "" for an unused slot, repeats allowed
	n    int      // slots with a key
}

func newTopScan(keys []string) topScan {
	t := topScan{keys: keys}
	for _, k := range keys {
		if k != "" {
			t.n++
		}
	}
	return t
}

// fieldValue is the value found at one path: its JSON text and type, and a
// string's content with escapes resolved. raw and str may point into the
// message.
type fieldValue struct {
	raw  string
	str  string
	kind gjson.Type
	ok   bool // the path is present
}

// valueOf converts a gjson answer.
func valueOf(r gjson.Result) fieldValue {
	return fieldValue{raw: r.Raw, str: r.Str, kind: r.Type, ok: r.Exists()}
}

// scan fills out[i] with the value of keys[i] in the top-level object s,
// the first occurrence when a key repeats, as gjson's ForEach would find
// it. It stops once every key is found. It returns false, with out in an
// unspecified state, when it cannot decide exactly as gjson would (see
// topScan); true with nothing found means none of the keys is there.
func (t *topScan) scan(s string, out []fieldValue) bool {
	out = out[:len(t.keys)]
	clear(out)
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return onlySpace(s, i+1)
	}
	left := t.n
	for {
		key, vstart, ok := scanKey(s, i)
		if !ok {
			return false
		}
		end, kind, plain, ok := scanValue(s, vstart)
		if !ok {
			return false
		}
		if n := t.fill(out, key, s[vstart:end], kind, plain); n > 0 {
			if left -= n; left == 0 {
				return true // gjson's walk stops here too, reading no further
			}
		}
		i = skipSpace(s, end)
		switch {
		case i == len(s):
			return false
		case s[i] == ',':
			i = skipSpace(s, i+1)
		case s[i] == '}':
			// gjson would go on looking for keys after the object: only
			// blanks may follow for the answer to be the same.
			return onlySpace(s, i+1)
		default:
			return false
		}
	}
}

// fill stores the value in every slot of key still empty and returns how
// many it filled; plain: the value is a string known to have no escapes.
func (t *topScan) fill(out []fieldValue, key, raw string, kind gjson.Type, plain bool) int {
	n := 0
	for i, k := range t.keys {
		if k != key || k == "" || out[i].ok {
			continue
		}
		out[i] = fieldValue{raw: raw, kind: kind, ok: true}
		switch {
		case kind == gjson.String && plain:
			out[i].str = raw[1 : len(raw)-1]
		case kind == gjson.String:
			out[i].str = stringContent(raw)
		}
		n++
	}
	return n
}

// stringContent is a JSON string's content: a view of raw, or with
// escapes, gjson's own unescaping of it (which allocates).
func stringContent(raw string) string {
	if strings.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	return gjson.Parse(raw).Str
}

// scanKey reads `"key" :` at s[i] and returns the key and where its value
// starts. An escaped key is not understood: gjson compares it unescaped.
func scanKey(s string, i int) (key string, value int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	end, plain, ok := scanString(s, i)
	if !ok {
		return "", 0, false
	}
	key = s[i+1 : end-1]
	if !plain && strings.IndexByte(key, '\\') >= 0 {
		return "", 0, false
	}
	i = skipSpace(s, end)
	if i == len(s) || s[i] != ':' {
		return "", 0, false
	}
	return key, skipSpace(s, i+1), true
}

// scanValue returns the end and type of the JSON value at s[i], and for a
// string whether it is plain (scanString).
func scanValue(s string, i int) (end int, kind gjson.Type, plain, ok bool) {
	if i >= len(s) {
		return 0, 0, false, false
	}
	switch c := s[i]; {
	case c == '"':
		end, plain, ok = scanString(s, i)
		return end, gjson.String, plain, ok
	case c == '{' || c == '[':
		end, ok = scanNested(s, i)
		return end, gjson.JSON, false, ok
	case c == '-' || isDigit(c):
		end, ok = scanNumber(s, i)
		return end, gjson.Number, false, ok
	case c == 't':
		end, ok = scanWord(s, i, "true")
		return end, gjson.True, false, ok
	case c == 'f':
		end, ok = scanWord(s, i, "false")
		return end, gjson.False, false, ok
	case c == 'n':
		end, ok = scanWord(s, i, "null")
		return end, gjson.Null, false, ok
	}
	return 0, 0, false, false
}

// scanString returns the end of the string whose opening quote is s[i]:
// the first quote not escaped, that is preceded by an even run of
// backslashes (gjson's rule too); and plain when the string is known to
// have no backslash, which spares the caller looking for one. Short strings
// (keys, most values) are read byte by byte, which tells; past
// shortString, IndexByte finds the quote at memory speed, and only a caller
// that wants the content looks for backslashes (a long padding value is
// skipped in one pass).
func scanString(s string, i int) (end int, plain, ok bool) {
	short := min(len(s), i+1+shortString)
	from := short
	for j := i + 1; j < short; j++ {
		if s[j] == '"' {
			return j + 1, true, true
		}
		if s[j] == '\\' {
			from = j
			break
		}
	}
	for {
		q := strings.IndexByte(s[from:], '"')
		if q < 0 {
			return 0, false, false
		}
		q += from
		b := q
		for b > i+1 && s[b-1] == '\\' {
			b--
		}
		if (q-b)%2 == 0 {
			return q + 1, false, true
		}
		from = q + 1
	}
}

// shortString is how far scanString looks byte by byte.
const shortString = 16

// scanNested returns the end of the object or array opening at s[i] the way
// gjson skips one: by depth, counting every bracket, brace and parenthesis
// outside strings, whatever their kind. A value never closed is not
// understood.
func scanNested(s string, i int) (int, bool) {
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '"':
			end, _, ok := scanString(s, i)
			if !ok {
				return 0, false
			}
			i = end - 1
		case '{', '[', '(':
			depth++
		case '}', ']', ')':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// scanNumber returns the end of a number as JSON writes it (RFC 8259 §6).
// gjson reads a number up to the next blank, comma, bracket or brace: one
// followed by anything else is not understood.
func scanNumber(s string, i int) (int, bool) {
	j := i
	if s[j] == '-' {
		j++
	}
	switch {
	case j < len(s) && s[j] == '0':
		j++
	case j < len(s) && s[j] >= '1' && s[j] <= '9':
		j = skipDigits(s, j)
	default:
		return 0, false
	}
	if j < len(s) && s[j] == '.' {
		k := skipDigits(s, j+1)
		if k == j+1 {
			return 0, false
		}
		j = k
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := skipDigits(s, j)
		if k == j {
			return 0, false
		}
		j = k
	}
	if j < len(s) && !endsNumber(s[j]) {
		return 0, false
	}
	return j, true
}

func endsNumber(c byte) bool { return c <= ' ' || c == ',' || c == ']' || c == '}' }

// scanWord returns the end of the literal word at s[i]. gjson reads a
// literal up to the first byte outside a-z.
func scanWord(s string, i int, word string) (int, bool) {
	if !strings.HasPrefix(s[i:], word) {
		return 0, false
	}
	j := i + len(word)
	if j < len(s) && s[j] >= 'a' && s[j] <= 'z' {
		return 0, false
	}
	return j, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func skipDigits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// skipSpace skips JSON's four blanks. gjson skips every byte up to ' ';
// the others stop the scan, which then does not understand what follows.
func skipSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func onlySpace(s string, i int) bool { return skipSpace(s, i) == len(s) }

// parseInt reads an integer written as an optional minus and at most 18
// digits, which cannot overflow an int64: every sequence number in practice,
// read eight digits at a time where strconv reads them one by one (a 16-digit
// number took a third of the field reader's time).
func parseInt(s string) (int64, bool) {
	d := strings.TrimPrefix(s, "-")
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var n uint64
	for ; len(d) >= 8; d = d[8:] {
		v, ok := eightDigits(d)
		if !ok {
			return 0, false
		}
		n = n*1e8 + v
	}
	for i := 0; i < len(d); i++ {
		c := d[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + uint64(c)
	}
	if len(s) > 0 && s[0] == '-' {
		return -int64(n), true
	}
	return int64(n), true
}

// eightDigits converts the ASCII digits d[:8] in one word: the first digit
// in the low byte, each byte less '0', then pairs, quads and the octet
// combined by multiplying the lanes in place.
func eightDigits(d string) (uint64, bool) {
	v := uint64(d[0]) | uint64(d[1])<<8 | uint64(d[2])<<16 | uint64(d[3])<<24 |
		uint64(d[4])<<32 | uint64(d[5])<<40 | uint64(d[6])<<48 | uint64(d[7])<<56
	v -= 0x3030303030303030
	// The lowest byte that is not a digit has its high nibble set now (below
	// '0') or once 6 is added (above '9'): no borrow or carry reaches it.
	if (v|(v+0x0606060606060606))&0xf0f0f0f0f0f0f0f0 != 0 {
		return 0, false
	}
	v = (v*10 + v>>8) & 0x00ff00ff00ff00ff
	v = (v*100 + v>>16) & 0x0000ffff0000ffff
	return (v*10000 + v>>32) & 0xffffffff, true
}
