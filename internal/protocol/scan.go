package protocol

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/rules"
)

// ruleScan reads, in one topScan of a message, what the rules of one
// direction need from its top level: the value of every path that is a
// plain key, and which keys each JSON pattern asks for are present. A
// containment pattern (rules.Matcher) cannot match a message missing one of
// its top-level keys, so its Match, a walk of the message of its own, is
// skipped for such a message; paths that are not plain keys, regular
// expressions, and messages the scan leaves to gjson are read as before.
// Without it, an app message that is neither a login nor a subscription was
// walked whole once per pattern, and each path lookup scanned it again: on
// the forwarding benchmarks' rules (BenchmarkRules), a 16 KiB event cost the
// app side 13.9 µs and now 0.23 µs, the upstream side 4.7 µs and now
// 0.24 µs; a 64-byte one, 350 and 69 ns, 130 and 79 ns.
type ruleScan struct {
	keys []string // distinct top-level keys read; at most maxRuleKeys
}

// maxRuleKeys bounds the keys one scan reads, so their values fit an array
// on the stack. More (a pattern with many fields) turns the scan off, not
// the rules.
const maxRuleKeys = 8

// ruleValues are a ruleScan's answers for one message.
type ruleValues struct {
	vals    [maxRuleKeys]fieldValue
	present uint8 // bit i: keys[i] is in the message
	known   bool  // the scan understood the message: vals and present hold
}

// slot adds key to the scan and returns its index, or -1 when the scan is
// full.
func (rs *ruleScan) slot(key string) int {
	for i, k := range rs.keys {
		if k == key {
			return i
		}
	}
	if len(rs.keys) == maxRuleKeys {
		return -1
	}
	rs.keys = append(rs.keys, key)
	return len(rs.keys) - 1
}

// read scans data, when some rule uses the scan.
func (rs *ruleScan) read(data []byte, v *ruleValues) {
	if len(rs.keys) == 0 {
		return
	}
	s := unsafe.String(unsafe.SliceData(data), len(data))
	top := topScan{keys: rs.keys, n: len(rs.keys)}
	if !top.scan(s, v.vals[:]) {
		return
	}
	v.known = true
	for i := range rs.keys {
		if v.vals[i].ok {
			v.present |= 1 << i
		}
	}
}

// scanMatcher is a Matcher with the keys its pattern requires and the
// strings some of them must equal.
type scanMatcher struct {
	m    *rules.Matcher
	need uint8 // keys the pattern requires; 0: no filter (re:, {}, scan full)
	eq   []keyString
}

// keyString is a top-level field of a pattern whose value is a string: the
// message's value there must be a string with the same content (escapes
// resolved) for the pattern to match.
type keyString struct {
	slot int
	str  string
}

func (rs *ruleScan) matcher(m *rules.Matcher) scanMatcher {
	sm := scanMatcher{m: m}
	fields := patternFields(m)
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	if !rs.fits(keys) {
		return sm
	}
	for _, f := range fields {
		i := rs.slot(f.key)
		sm.need |= 1 << i
		if f.isString {
			sm.eq = append(sm.eq, keyString{slot: i, str: f.str})
		}
	}
	return sm
}

// fits reports whether the scan has room for the keys it does not read yet
// ("" is no key).
func (rs *ruleScan) fits(keys []string) bool {
	n := len(rs.keys)
	for i, k := range keys {
		if k != "" && !slices.Contains(rs.keys, k) && !slices.Contains(keys[:i], k) {
			n++
		}
	}
	return n <= maxRuleKeys
}

// match is m.Match(data), answered false at once when the scan shows the
// message cannot match: a key the pattern requires is missing, or a string
// the pattern requires differs (rules.Matcher compares strings unescaped,
// as stringContent reads them). Anything else is left to Match, which also
// checks the message is valid JSON.
func (sm *scanMatcher) match(data []byte, v *ruleValues) bool {
	if sm.m == nil {
		return false
	}
	if v.known {
		if v.present&sm.need != sm.need {
			return false
		}
		for _, e := range sm.eq {
			if f := &v.vals[e.slot]; f.kind != gjson.String || f.str != e.str {
				return false
			}
		}
	}
	return sm.m.Match(data)
}

// patternField is a top-level field of a JSON pattern.
type patternField struct {
	key      string
	str      string // the value, unescaped, when isString
	isString bool
}

// patternFields returns the top-level fields of a JSON pattern as
// rules.Compile reads them (gjson's unescaped keys and strings), or nil for
// a regular expression.
func patternFields(m *rules.Matcher) []patternField {
	if m == nil || strings.HasPrefix(m.String(), "re:") {
		return nil
	}
	var fields []patternField
	gjson.Parse(m.String()).ForEach(func(k, v gjson.Result) bool {
		fields = append(fields, patternField{key: k.Str, str: v.Str, isString: v.Type == gjson.String})
		return true
	})
	return fields
}

// scanPath is a Path with the scan slot of its key, when it is a plain key.
type scanPath struct {
	p    rules.Path
	slot int // -1: looked up with gjson
}

func (rs *ruleScan) path(p rules.Path) scanPath {
	sp := scanPath{p: p, slot: -1}
	if isSet(p) && isPlainKey(p.String()) {
		sp.slot = rs.slot(p.String())
	}
	return sp
}

// get returns the value at the path, its text its own (not the message's):
// from the scan, copied, or from rules.Path.Get, which copies.
func (sp scanPath) get(data []byte, v *ruleValues) fieldValue {
	switch {
	case !isSet(sp.p):
		return fieldValue{}
	case !v.known || sp.slot < 0:
		return valueOf(sp.p.Get(data))
	}
	f := v.vals[sp.slot]
	if f.ok {
		f.raw = strings.Clone(f.raw)
		if f.kind == gjson.String {
			f.str = stringContent(f.raw)
		}
	}
	return f
}
