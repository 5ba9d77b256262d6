package proxy

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/rules"
)

// The fields a sequenced upstream message is read for, by index.
const (
	fieldSeq     = iota // TETHER_SEQ_PATH
	fieldStream         // TETHER_STREAM_PATH
	fieldSession        // TETHER_SESSION_PATH
	fieldResync         // TETHER_RESYNC_SEQ_PATH
	numFields
)

// fieldReader reads every configured path of a message at once. When all
// of them are plain top-level keys (seq, session, channel: the usual case)
// it walks the message's top-level object once and stops as soon as each
// key has been seen; otherwise it looks each path up. Either way the
// results point into the message: they are valid while it is.
type fieldReader struct {
	paths [numFields]rules.Path
	keys  [numFields]string // the top-level key of each set path, when simple
	n     int               // paths set
	flat  bool              // every set path is a plain top-level key
}

func newFieldReader(paths ...rules.Path) fieldReader {
	var r fieldReader
	r.flat = true
	for i, p := range paths[:numFields] {
		if !isSet(p) {
			continue
		}
		r.paths[i] = p
		r.n++
		if isPlainKey(p.String()) {
			r.keys[i] = p.String()
		} else {
			r.flat = false
		}
	}
	return r
}

// isPlainKey reports whether a gjson path names one top-level key: no
// separator, wildcard, query, modifier or escape, and not all digits (which
// gjson reads as an array index too).
func isPlainKey(p string) bool {
	if strings.ContainsAny(p, `.|#@*?\!=<>%[]{}()"',:`) {
		return false
	}
	_, err := strconv.ParseUint(p, 10, 64)
	return err != nil
}

// read fills out with the value at each set path of data.
func (r *fieldReader) read(data []byte, out *[numFields]gjson.Result) {
	*out = [numFields]gjson.Result{}
	if r.n == 0 {
		return
	}
	s := unsafe.String(unsafe.SliceData(data), len(data))
	if r.flat && isObject(s) {
		r.walk(s, out)
		return
	}
	for i, p := range r.paths {
		if isSet(p) {
			out[i] = gjson.Get(s, p.String())
		}
	}
}

// walk reads the top-level object once. Like gjson.Get, a key that appears
// twice yields its first value.
func (r *fieldReader) walk(s string, out *[numFields]gjson.Result) {
	left := r.n
	gjson.Parse(s).ForEach(func(key, value gjson.Result) bool {
		for i, k := range r.keys {
			if k != "" && k == key.Str && !out[i].Exists() {
				out[i] = value
				left--
			}
		}
		return left > 0
	})
}

// isObject reports whether s starts, after blanks, with '{'.
func isObject(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

// seqNumber reads a sequence number: a JSON number whose value is an
// integer within int64. Most are plain digits, parsed at once; other forms
// (42.0, 4.2e1) go through rules.Path.Int, which decides on the exact
// decimal value, so numbers above 2^53 stay exact.
func seqNumber(v gjson.Result, p rules.Path, data []byte) (int64, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
		return n, true
	}
	return p.Int(data)
}

// nameOf reads a stream name or session id: a string's value, or the text
// of any other JSON value; "" when absent. The result may point into the
// message: clone it before keeping it.
func nameOf(v gjson.Result) string {
	switch {
	case !v.Exists():
		return ""
	case v.Type == gjson.String:
		return v.Str
	}
	return v.Raw
}
