package rules

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Path is a validated gjson path (TETHER_SEQ_PATH, TETHER_ACK_ID_PATH, …)
// such as "seq", "data.seq" or "params.0". The zero Path selects nothing.
// A Path is immutable and safe for concurrent use.
//
// Get and Int do not validate the whole message, which would double the cost
// of every lookup on the hot path: on malformed JSON they may still return
// a value found before the damage. Where validity matters, a Matcher
// decides first. Like gjson, a key that appears twice yields its first value.
type Path struct {
	s string
}

// ParsePath checks s and returns it as a Path. It rejects what is certainly
// a configuration mistake rather than a lookup that merely finds nothing: an
// empty path, control characters, invalid UTF-8, surrounding spaces, empty
// components ("a..b", ".a", "a."), a trailing escape and unbalanced
// brackets or quotes in queries and modifiers.
func ParsePath(s string) (Path, error) {
	if err := checkPathText(s); err != nil {
		return Path{}, err
	}
	if err := checkPathStructure(s); err != nil {
		return Path{}, err
	}
	return Path{s: s}, nil
}

// String returns the path as given to ParsePath.
func (p Path) String() string { return p.s }

// Get returns the value at p, or the zero Result when it is absent (or p is
// the zero Path). The Result holds its own copy of the text, so it stays
// valid after data is reused.
func (p Path) Get(data []byte) gjson.Result {
	if p.s == "" {
		return gjson.Result{}
	}
	return gjson.GetBytes(data, p.s)
}

// Int returns the integer at p. The value must be a JSON number whose exact
// value is an integer within the int64 range (42, -7, 42.0 and 4.2e1
// qualify; 42.5 and 1e19 do not), or a JSON string holding only decimal
// digits with an optional leading minus ("42", "-7"; not "+42", " 42",
// "4.2e1" or ""), the form SSE event ids and quoted numbers take. Deciding
// on the exact decimal value, not a float64, keeps sequence numbers above
// 2^53 exact.
func (p Path) Int(data []byte) (int64, bool) {
	if p.s == "" {
		return 0, false
	}
	// The string view is safe: only r.Raw and r.Str are read, before returning.
	r := gjson.Get(bytesString(data), p.s)
	if r.Type == gjson.String {
		return DecimalString(r.Str)
	}
	if r.Type != gjson.Number {
		return 0, false
	}
	d, ok := parseDecimal(r.Raw)
	if !ok {
		return 0, false
	}
	return d.int64()
}

// UnmarshalText implements encoding.TextUnmarshaler, so configuration
// parsers (caarlos0/env) can fill a Path field directly.
func (p *Path) UnmarshalText(b []byte) error {
	parsed, err := ParsePath(string(b))
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}

func checkPathText(s string) error {
	switch {
	case s == "":
		return errors.New("path is empty")
	case !utf8.ValidString(s):
		return errors.New("path is not valid UTF-8")
	case s[0] == ' ' || s[len(s)-1] == ' ':
		return errors.New("path has a leading or trailing space")
	}
	for i, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("path has a control character at offset %d", i)
		}
	}
	return nil
}

// pathScan tracks the nesting of queries "#(…)", multipaths "[…]" and "{…}"
// and quoted strings inside them, where '.' and '|' do not separate
// components.
type pathScan struct {
	closers   []byte // expected closing brackets, innermost last
	inQuote   bool
	compStart bool // no byte of the current component seen yet
}

func checkPathStructure(s string) error {
	sc := pathScan{compStart: true}
	for i := 0; i < len(s); i++ {
		skip, err := sc.step(s, i)
		if err != nil {
			return err
		}
		i += skip
	}
	switch {
	case sc.inQuote:
		return errors.New("path has an unterminated string")
	case len(sc.closers) > 0:
		return fmt.Errorf("path is missing a closing %q", sc.closers[len(sc.closers)-1])
	case sc.compStart:
		return fmt.Errorf("path has an empty component at offset %d", len(s))
	}
	return nil
}

// step consumes s[i] and reports how many following bytes it consumed too
// (the escaped byte after a backslash).
func (sc *pathScan) step(s string, i int) (int, error) {
	c := s[i]
	if sc.inQuote {
		switch c {
		case '\\':
			return 1, nil
		case '"':
			sc.inQuote = false
		}
		return 0, nil
	}
	switch {
	case c == '\\':
		if i+1 == len(s) {
			return 0, errors.New("path ends with an escape character")
		}
		sc.compStart = false
		return 1, nil
	case c == '"' && len(sc.closers) > 0:
		sc.inQuote = true
	case c == '(' || c == '[' || c == '{':
		sc.closers = append(sc.closers, closerOf(c))
	case c == ')' || c == ']' || c == '}':
		if len(sc.closers) == 0 || sc.closers[len(sc.closers)-1] != c {
			return 0, fmt.Errorf("path has an unexpected %q at offset %d", c, i)
		}
		sc.closers = sc.closers[:len(sc.closers)-1]
	case (c == '.' || c == '|') && len(sc.closers) == 0:
		if sc.compStart {
			return 0, fmt.Errorf("path has an empty component at offset %d", i)
		}
		sc.compStart = true
		return 0, nil
	}
	sc.compStart = false
	return 0, nil
}

func closerOf(c byte) byte {
	switch c {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}

// DecimalString parses s when it is only decimal digits with an optional
// leading minus, within the int64 range: the strict form of a quoted
// integer. Anything else (a sign +, spaces, a fraction, an exponent, an
// empty string) is not a number here.
func DecimalString(s string) (int64, bool) {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false // out of range
	}
	return n, true
}
