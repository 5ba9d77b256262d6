package rules

// maxExponent bounds the exponent parseDecimal accepts. Beyond it a number
// is compared by its exact text instead, so the arithmetic below cannot
// overflow whatever the input.
const maxExponent = 1 << 40

// decimal is a JSON number in exact normal form: 0.d1d2…dn × 10^exp with d1
// and dn non-zero. Two JSON numbers are numerically equal exactly when their
// normal forms are, which float64 cannot promise past 2^53 (ids often are).
type decimal struct {
	neg bool
	exp int64
	// digits runs from the first to the last significant digit of the
	// original text, so it may contain the '.'; empty means zero. Slicing the
	// text instead of copying keeps parsing free of allocations.
	digits string
}

// parseDecimal parses raw, which must be exactly a JSON number
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?); ok is false otherwise.
func parseDecimal(raw string) (d decimal, ok bool) {
	i := 0
	if i < len(raw) && raw[i] == '-' {
		d.neg = true
		i++
	}
	intStart := i
	switch {
	case i < len(raw) && raw[i] == '0':
		i++
	case i < len(raw) && isDigit(raw[i]):
		i = skipDigits(raw, i)
	default:
		return decimal{}, false
	}
	intEnd, fracStart := i, i
	if i < len(raw) && raw[i] == '.' {
		fracStart = i + 1
		if i = skipDigits(raw, fracStart); i == fracStart {
			return decimal{}, false
		}
	}
	mantEnd := i
	e, ok := parseExponent(raw[i:])
	if !ok {
		return decimal{}, false
	}
	return normalize(d.neg, raw, intStart, intEnd, fracStart, mantEnd, e), true
}

// parseExponent parses an optional [eE][+-]?[0-9]+ suffix that must make up
// all of s.
func parseExponent(s string) (int64, bool) {
	if s == "" {
		return 0, true
	}
	if s[0] != 'e' && s[0] != 'E' {
		return 0, false
	}
	i, neg := 1, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i == len(s) {
		return 0, false
	}
	var e int64
	for ; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		if e = 10*e + int64(s[i]-'0'); e > maxExponent {
			return 0, false
		}
	}
	if neg {
		e = -e
	}
	return e, true
}

// normalize builds the normal form from the parts of a valid number: the
// integer digits raw[intStart:intEnd], the fraction digits
// raw[fracStart:mantEnd] (empty when fracStart == mantEnd) and exponent e.
func normalize(neg bool, raw string, intStart, intEnd, fracStart, mantEnd int, e int64) decimal {
	first := -1
	for i := intStart; i < mantEnd; i++ {
		if raw[i] != '0' && raw[i] != '.' {
			first = i
			break
		}
	}
	if first < 0 {
		return decimal{} // zero, and -0 equals 0
	}
	last := mantEnd - 1
	for raw[last] == '0' || raw[last] == '.' {
		last--
	}
	// The value is 0.D × 10^(integer digit count + e), D being all mantissa
	// digits; dropping the k leading zeros of D lowers the exponent by k.
	var leading int
	if first < intEnd {
		leading = first - intStart
	} else {
		leading = (intEnd - intStart) + (first - fracStart)
	}
	exp := int64(intEnd-intStart-leading) + e
	return decimal{neg: neg, exp: exp, digits: raw[first : last+1]}
}

// equal reports whether d and o denote the same number.
func (d decimal) equal(o decimal) bool {
	if d.neg != o.neg || d.exp != o.exp {
		return false
	}
	a, b := d.digits, o.digits
	i, j := 0, 0
	for {
		if i < len(a) && a[i] == '.' {
			i++
		}
		if j < len(b) && b[j] == '.' {
			j++
		}
		if i == len(a) || j == len(b) {
			return i == len(a) && j == len(b)
		}
		if a[i] != b[j] {
			return false
		}
		i++
		j++
	}
}

// int64 returns d as an int64 when it is an integer within range.
func (d decimal) int64() (int64, bool) {
	n := int64(len(d.digits))
	if n > 0 && d.exp < n-countDots(d.digits) {
		return 0, false // has a fractional part (zero is handled by n == 0)
	}
	if d.exp > 19 {
		return 0, false // at least 10^19 > MaxInt64
	}
	// From here the value is below 10^19, so the magnitude fits a uint64,
	// which also holds 1<<63 for -9223372036854775808.
	var u uint64
	var scale int64
	for i := 0; i < len(d.digits); i++ {
		if d.digits[i] != '.' {
			u = 10*u + uint64(d.digits[i]-'0')
			scale++
		}
	}
	for ; scale < d.exp; scale++ {
		u *= 10
	}
	return signed(u, d.neg)
}

// signed applies the sign to magnitude u, failing outside the int64 range.
func signed(u uint64, neg bool) (int64, bool) {
	const limit = 1 << 63
	switch {
	case neg && u <= limit:
		return int64(-u), true // -(1<<63) wraps to itself, the intended value
	case !neg && u < limit:
		return int64(u), true
	}
	return 0, false
}

func countDots(s string) int64 {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return 1
		}
	}
	return 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipDigits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}
