package protocol

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
	fieldEpoch          // TETHER_EPOCH_PATH
	fieldFirst          // TETHER_SEQ_FIRST_PATH
	fieldPrev           // TETHER_SEQ_PREV_PATH
	numFields
)

// seqRules are the rules that read a sequenced upstream message
// (Rules.SeqPath and the paths and patterns beside it).
type seqRules struct {
	on                        bool // SeqPath is set: upstream messages are sequenced
	capture                   bool // SessionMatch and SessionPath are set
	resync                    bool // ResyncMatch and ResyncSeqPath are set
	seqPath, resyncSeqPath    rules.Path
	firstPath, prevPath       rules.Path
	sessionMatch, resyncMatch *rules.Matcher
	fields                    fieldReader
}

func newSeqRules(r Rules) seqRules {
	return seqRules{
		on:            isSet(r.SeqPath),
		capture:       r.SessionMatch != nil && isSet(r.SessionPath),
		resync:        r.ResyncMatch != nil && isSet(r.ResyncSeqPath),
		seqPath:       r.SeqPath,
		resyncSeqPath: r.ResyncSeqPath,
		firstPath:     r.SeqFirstPath,
		prevPath:      r.SeqPrevPath,
		sessionMatch:  r.SessionMatch,
		resyncMatch:   r.ResyncMatch,
		fields: newFieldReader(r.SeqPath, r.StreamPath, r.SessionPath, r.ResyncSeqPath, r.EpochPath,
			r.SeqFirstPath, r.SeqPrevPath),
	}
}

// classify reads a message for the sequence rules: every configured path
// in one pass, then the session and resync patterns.
func (r *seqRules) classify(data []byte) Fields { return r.classifyIn(data, nil) }

// classifyIn is classify for a message whose top level the upstream rules'
// scan read into v (nil when it did not).
func (r *seqRules) classifyIn(data []byte, v *ruleValues) Fields {
	var f [numFields]fieldValue
	r.fields.readIn(data, v, &f)
	var in Fields
	in.Seq, in.HasSeq = seqNumber(f[fieldSeq], r.seqPath, data)
	in.Stream = nameOf(f[fieldStream])
	in.Epoch = nameOf(f[fieldEpoch])
	if f[fieldFirst].ok {
		in.First, in.HasFirst = seqNumber(f[fieldFirst], r.firstPath, data)
	}
	if f[fieldPrev].ok {
		in.Prev, in.HasPrev = seqNumber(f[fieldPrev], r.prevPath, data)
	}
	if r.capture && f[fieldSession].ok && r.sessionMatch.Match(data) {
		in.Session, in.Captured = nameOf(f[fieldSession]), true
	}
	if r.resync && f[fieldResync].ok && r.resyncMatch.Match(data) {
		in.ResyncSeq, in.Resync = seqNumber(f[fieldResync], r.resyncSeqPath, data)
	}
	return in
}

// fieldReader reads every configured path of a message at once. When all
// of them are plain top-level keys (seq, session, channel: the usual case)
// it scans the message's top-level object once and stops as soon as each
// key has been seen (topScan); otherwise, and for a message the scan does
// not understand, gjson answers. Either way the results point into the
// message: they are valid while it is.
type fieldReader struct {
	paths [numFields]rules.Path
	keys  [numFields]string // the top-level key of each set path, when simple
	n     int               // paths set
	flat  bool              // every set path is a plain top-level key
	// shared: the keys are read by the upstream rules' scan too, where
	// slot[i] is keys[i]'s index (share).
	shared bool
	slot   [numFields]int
}

// share adds the keys to rs, the scan the hiding rules run on every
// upstream message, so one scan serves both (ruleSet.Upstream), when
// they are all plain keys and rs has room for them.
func (r *fieldReader) share(rs *ruleScan) {
	if !r.flat || r.n == 0 || !rs.fits(r.keys[:]) {
		return
	}
	for i, k := range r.keys {
		if k != "" {
			r.slot[i] = rs.slot(k)
		}
	}
	r.shared = true
}

// readIn fills out from v, the shared scan's answers for data, when they
// hold; otherwise it reads data itself.
func (r *fieldReader) readIn(data []byte, v *ruleValues, out *[numFields]fieldValue) {
	if !r.shared || v == nil || !v.known {
		r.read(data, out)
		return
	}
	for i, k := range r.keys {
		out[i] = fieldValue{}
		if k != "" {
			out[i] = v.vals[r.slot[i]]
		}
	}
}

func newFieldReader(paths ...rules.Path) fieldReader {
	var r fieldReader
	r.flat = true
	for i, p := range paths {
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
func (r *fieldReader) read(data []byte, out *[numFields]fieldValue) {
	if r.n == 0 {
		*out = [numFields]fieldValue{}
		return
	}
	s := unsafe.String(unsafe.SliceData(data), len(data))
	if r.flat && isObject(s) {
		// keys is an array inside r: the scanner is built here rather than
		// kept, so copying a fieldReader never leaves one pointing at
		// another's keys.
		top := topScan{keys: r.keys[:], n: r.n}
		if top.scan(s, out[:]) {
			return
		}
		r.walk(s, out)
		return
	}
	*out = [numFields]fieldValue{}
	for i, p := range r.paths {
		if isSet(p) {
			out[i] = valueOf(gjson.Get(s, p.String()))
		}
	}
}

// walk reads the top-level object with gjson, for what topScan leaves to
// it. Like gjson.Get, a key that appears twice yields its first value.
func (r *fieldReader) walk(s string, out *[numFields]fieldValue) {
	*out = [numFields]fieldValue{}
	left := r.n
	gjson.Parse(s).ForEach(func(key, value gjson.Result) bool {
		for i, k := range r.keys {
			if k != "" && k == key.Str && !out[i].ok {
				out[i] = valueOf(value)
				left--
			}
		}
		return left > 0
	})
}

// isObject reports whether s starts, after blanks, with '{'.
func isObject(s string) bool {
	i := skipSpace(s, 0)
	return i < len(s) && s[i] == '{'
}

// seqNumber reads a sequence number: a JSON number whose value is an
// integer within int64. Most are plain digits, parsed at once; other forms
// (42.0, 4.2e1) go through rules.Path.Int, which decides on the exact
// decimal value, so numbers above 2^53 stay exact.
func seqNumber(v fieldValue, p rules.Path, data []byte) (int64, bool) {
	if v.kind == gjson.String {
		// A number written as a JSON string of decimal digits ("42"): SSE
		// event ids in TETHER_SSE_FORMAT=json, and feeds that quote their
		// numbers so that JavaScript keeps them exact.
		return rules.DecimalString(v.str)
	}
	if v.kind != gjson.Number {
		return 0, false
	}
	if n, ok := parseInt(v.raw); ok {
		return n, true
	}
	if n, err := strconv.ParseInt(v.raw, 10, 64); err == nil {
		return n, true
	}
	return p.Int(data)
}

// nameOf reads a stream name or session id: a string's value, or the text
// of any other JSON value; "" when absent. The result may point into the
// message: clone it before keeping it.
func nameOf(v fieldValue) string {
	switch {
	case !v.ok:
		return ""
	case v.kind == gjson.String:
		return v.str
	}
	return v.raw
}
