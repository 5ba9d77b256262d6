package sse

import "unicode/utf8"

// replacement is U+FFFD in UTF-8.
const replacement = "\uFFFD"

// bom is the UTF-8 byte order mark that "UTF-8 decode" strips from the
// start of a stream.
const bom = "\xEF\xBB\xBF"

// appendDecoded appends src, decoded as the Encoding standard's UTF-8
// decoder decodes it, to dst. Valid input is copied as it is. In invalid
// input every maximal subpart of an ill-formed sequence (a lead byte and
// the continuation bytes that were acceptable after it) becomes one U+FFFD,
// and the byte that broke the sequence is decoded afresh.
//
// Go's own decoders differ: utf8.DecodeRune yields one U+FFFD per byte of
// a truncated sequence, and strings.ToValidUTF8 one per run of bad bytes.
// Either would make tether's event data differ from what a browser's
// EventSource delivers for the same stream.
//
// Decoding a line on its own gives the same text as decoding the whole
// stream: CR and LF are ASCII, so they end any sequence in progress (which
// then yields its U+FFFD) and are never swallowed by one.
func appendDecoded(dst, src []byte) []byte {
	if utf8.Valid(src) {
		return append(dst, src...)
	}
	for i := 0; i < len(src); {
		if src[i] < utf8.RuneSelf {
			dst = append(dst, src[i])
			i++
			continue
		}
		end, ok := sequenceEnd(src, i)
		if ok {
			dst = append(dst, src[i:end]...)
		} else {
			dst = append(dst, replacement...)
		}
		i = end
	}
	return dst
}

// sequenceEnd looks at the sequence that starts with the non-ASCII byte
// src[i]. If it is well-formed, it returns the index after it and true.
// Otherwise it returns the index after its maximal subpart (at least i+1:
// a lead byte that cannot start any sequence is a subpart of its own) and
// false; the byte there, if any, starts the next sequence.
func sequenceEnd(src []byte, i int) (end int, ok bool) {
	need, lo, hi := lead(src[i])
	if need == 0 {
		return i + 1, false
	}
	j := i + 1
	for ; need > 0; need-- {
		if j >= len(src) || src[j] < lo || src[j] > hi {
			return j, false
		}
		// Only the first continuation byte has a narrowed range.
		lo, hi = 0x80, 0xBF
		j++
	}
	return j, true
}

// lead classifies a non-ASCII byte as the Encoding standard's UTF-8 decoder
// does: how many continuation bytes must follow, and the range the first of
// them must fall in (narrowed after E0, ED, F0 and F4 to exclude overlong
// forms, surrogates and code points above U+10FFFF). need is 0 for bytes
// that cannot start a sequence.
func lead(b byte) (need int, lo, hi byte) {
	switch {
	case b >= 0xC2 && b <= 0xDF:
		return 1, 0x80, 0xBF
	case b == 0xE0:
		return 2, 0xA0, 0xBF
	case b == 0xED:
		return 2, 0x80, 0x9F
	case b >= 0xE1 && b <= 0xEF:
		return 2, 0x80, 0xBF
	case b == 0xF0:
		return 3, 0x90, 0xBF
	case b == 0xF4:
		return 3, 0x80, 0x8F
	case b >= 0xF1 && b <= 0xF3:
		return 3, 0x80, 0xBF
	}
	return 0, 0, 0
}
