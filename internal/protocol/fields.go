package protocol

import (
	"slices"
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
func (r *seqRules) classify(data []byte) Fields {
	var v ruleValues
	var in Fields
	r.classifyIn(data, &v, &in)
	return in
}

// classifyIn is classify into in for a message whose top level the upstream
// rules' scan read into v, when it did (v.known). Otherwise the reader
// reads the message into v itself: the hiding rules are done with it.
func (r *seqRules) classifyIn(data []byte, v *ruleValues, in *Fields) {
	at := &r.fields.sharedAt
	if !r.fields.shared || !v.known {
		r.fields.read(data, &v.vals)
		at = &r.fields.at
	}
	vals := &v.vals
	in.Seq, in.HasSeq = seqNumber(valueAt(vals, at[fieldSeq]), r.seqPath, data)
	in.Stream = nameOf(valueAt(vals, at[fieldStream]))
	in.Epoch = nameOf(valueAt(vals, at[fieldEpoch]))
	if f := valueAt(vals, at[fieldFirst]); f.ok {
		in.First, in.HasFirst = seqNumber(f, r.firstPath, data)
	}
	if f := valueAt(vals, at[fieldPrev]); f.ok {
		in.Prev, in.HasPrev = seqNumber(f, r.prevPath, data)
	}
	if f := valueAt(vals, at[fieldSession]); r.capture && f.ok && r.sessionMatch.Match(data) {
		in.Session, in.Captured = nameOf(f), true
	}
	if f := valueAt(vals, at[fieldResync]); r.resync && f.ok && r.resyncMatch.Match(data) {
		in.ResyncSeq, in.Resync = seqNumber(f, r.resyncSeqPath, data)
	}
}

// fieldReader reads every configured path of a message at once. When all
// of them are plain top-level keys (seq, session, channel: the usual case)
// it scans the message's top-level object once for their distinct keys and
// stops as soon as each has been seen (topScan): with only TETHER_SEQ_PATH
// set and the number first, that is the message's first bytes. Otherwise,
// and for a message the scan does not understand, gjson answers. Either way
// the results point into the message: they are valid while it is.
type fieldReader struct {
	paths [numFields]rules.Path
	n     int  // paths set
	flat  bool // every set path is a plain top-level key
	// keys are the distinct keys of the set paths, when flat: what one
	// scan reads. at[i] is where read puts field i's value: the index of
	// its key in keys when flat, i otherwise; noField when the path is
	// unset.
	keys []string
	at   [numFields]int8
	// shared: the keys are read by the upstream rules' scan too, where
	// field i's value is at sharedAt[i] (share).
	shared   bool
	sharedAt [numFields]int8
}

// noField is the index of an unset path's value: there is none.
const noField = -1

// noValue is the value of an unset path, for valueAt.
var noValue fieldValue

// valueAt is the value read at index at of vals, or none for noField.
func valueAt(vals *[maxRuleKeys]fieldValue, at int8) *fieldValue {
	if at == noField {
		return &noValue
	}
	return &vals[at]
}

// share adds the keys to rs, the scan the hiding rules run on every
// upstream message, so one scan serves both (ruleSet.Upstream), when
// they are all plain keys and rs has room for them.
func (r *fieldReader) share(rs *ruleScan) {
	if !r.flat || r.n == 0 || !rs.fits(r.keys) {
		return
	}
	for i, a := range r.at {
		r.sharedAt[i] = noField
		if a != noField {
			r.sharedAt[i] = int8(rs.slot(r.keys[a]))
		}
	}
	r.shared = true
}

func newFieldReader(paths ...rules.Path) fieldReader {
	r := fieldReader{flat: true}
	for i := range r.at {
		r.at[i] = noField
	}
	for i, p := range paths {
		if !isSet(p) {
			continue
		}
		r.paths[i] = p
		r.n++
		if !isPlainKey(p.String()) {
			r.flat = false
			continue
		}
		k := slices.Index(r.keys, p.String())
		if k < 0 {
			k = len(r.keys)
			r.keys = append(r.keys, p.String())
		}
		r.at[i] = int8(k)
	}
	if !r.flat {
		// Each path is looked up on its own, its value kept at its own
		// index.
		r.keys = nil
		for i, p := range r.paths {
			if r.at[i] = noField; isSet(p) {
				r.at[i] = int8(i)
			}
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

// read puts the value at each set path of data into vals, where r.at
// says.
func (r *fieldReader) read(data []byte, vals *[maxRuleKeys]fieldValue) {
	if r.n == 0 {
		return
	}
	s := unsafe.String(unsafe.SliceData(data), len(data))
	if r.flat && isObject(s) {
		top := topScan{keys: r.keys, n: len(r.keys)}
		if top.scan(s, vals[:len(r.keys)]) {
			return
		}
		r.walk(s, vals)
		return
	}
	for i, p := range r.paths {
		if a := r.at[i]; a != noField {
			vals[a] = valueOf(gjson.Get(s, p.String()))
		}
	}
}

// walk reads the top-level object with gjson, for what topScan leaves to
// it. Like gjson.Get, a key that appears twice yields its first value.
func (r *fieldReader) walk(s string, vals *[maxRuleKeys]fieldValue) {
	out := vals[:len(r.keys)]
	clear(out)
	left := len(r.keys)
	gjson.Parse(s).ForEach(func(key, value gjson.Result) bool {
		for i, k := range r.keys {
			if k == key.Str && !out[i].ok {
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
func seqNumber(v *fieldValue, p rules.Path, data []byte) (int64, bool) {
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
func nameOf(v *fieldValue) string {
	switch {
	case !v.ok:
		return ""
	case v.kind == gjson.String:
		return v.str
	}
	return v.raw
}
