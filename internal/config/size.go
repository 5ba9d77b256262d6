package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes, written in the environment as a whole number with
// an optional binary suffix: "1048576", "512B", "64KiB", "8MiB", "1GiB".
//
// Decimal units (KB, MB) are refused rather than guessed: "8MB" means 8,000,000
// to some operators and 8 MiB to others, and a limit that is silently off by 5%
// is worse than a clear error at start.
type ByteSize int64

// Binary size units.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

// sizeUnits lists the suffixes from largest to smallest, so String finds the
// shortest exact form first.
var sizeUnits = []struct {
	suffix string
	size   ByteSize
}{
	{"GiB", GiB},
	{"MiB", MiB},
	{"KiB", KiB},
	{"B", 1},
}

// UnmarshalText parses a size such as "8MiB". Suffixes are case-sensitive,
// decimals and signs are not allowed.
func (s *ByteSize) UnmarshalText(text []byte) error {
	raw := string(text)
	num, unit := splitSizeUnit(strings.TrimSpace(raw))
	if num == "" || strings.Trim(num, "0123456789") != "" {
		return sizeSyntaxError(raw)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/int64(unit) {
		return fmt.Errorf("invalid size %q: too large", raw)
	}
	*s = ByteSize(n) * unit
	return nil
}

// splitSizeUnit separates the digits from a known suffix; a value without a
// suffix is in bytes.
func splitSizeUnit(v string) (string, ByteSize) {
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			return num, u.size
		}
	}
	return v, 1
}

func sizeSyntaxError(raw string) error {
	return fmt.Errorf("invalid size %q: use a number with an optional KiB, MiB or GiB suffix", raw)
}

// String prints the shortest exact form that UnmarshalText reads back:
// 8388608 → "8MiB", 1000 → "1000B".
func (s ByteSize) String() string {
	for _, u := range sizeUnits {
		if s != 0 && s%u.size == 0 {
			return strconv.FormatInt(int64(s/u.size), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}
