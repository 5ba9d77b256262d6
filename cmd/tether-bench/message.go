package main

import (
	"errors"
	"fmt"
)

// A feed message is JSON text with fixed-width numbers, so the feed stamps it in
// place and the sink parses it without allocating:
//
//	{"seq":1000000000000001,"ts":1757000000000000000,"p":"xxxx…"}
//
// seq starts at seqBase+1 on every connection and keeps 16 digits for 9·10^15
// messages; ts is the send time in Unix nanoseconds (19 digits until 2286). The
// padding brings the message to the size being measured.
const (
	seqBase   = 1_000_000_000_000_000
	seqDigits = 16
	tsDigits  = 19

	msgPrefix = `{"seq":`
	msgMid    = `,"ts":`
	msgPad    = `,"p":"`
	msgSuffix = `"}`

	seqAt = len(msgPrefix)
	tsAt  = seqAt + seqDigits + len(msgMid)
	padAt = tsAt + tsDigits + len(msgPad)

	// minMessageSize is the smallest message with the fields above.
	minMessageSize = padAt + len(msgSuffix)
)

var errMalformed = errors.New("malformed feed message")

// newMessage returns a message of size bytes with seq and ts still zero.
func newMessage(size int) ([]byte, error) {
	if size < minMessageSize {
		return nil, fmt.Errorf("message size %d below the minimum of %d bytes", size, minMessageSize)
	}
	b := make([]byte, 0, size)
	b = append(b, msgPrefix...)
	b = appendZeros(b, seqDigits)
	b = append(b, msgMid...)
	b = appendZeros(b, tsDigits)
	b = append(b, msgPad...)
	for len(b) < size-len(msgSuffix) {
		b = append(b, 'x')
	}
	return append(b, msgSuffix...), nil
}

func appendZeros(b []byte, n int) []byte {
	for range n {
		b = append(b, '0')
	}
	return b
}

// stamp writes seq (counted from 1) and ts into a message made by newMessage.
func stamp(msg []byte, seq uint64, ts int64) {
	putDigits(msg[seqAt:seqAt+seqDigits], seqBase+seq)
	putDigits(msg[tsAt:tsAt+tsDigits], uint64(ts))
}

// putDigits writes v right-aligned in decimal, filling dst.
func putDigits(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}

// parseMessage returns the sequence number (from 1) and send time of a message.
func parseMessage(msg []byte) (seq uint64, ts int64, err error) {
	if len(msg) < minMessageSize || string(msg[:seqAt]) != msgPrefix ||
		string(msg[seqAt+seqDigits:tsAt]) != msgMid {
		return 0, 0, errMalformed
	}
	s, ok := digits(msg[seqAt : seqAt+seqDigits])
	if !ok || s <= seqBase {
		return 0, 0, errMalformed
	}
	t, ok := digits(msg[tsAt : tsAt+tsDigits])
	if !ok {
		return 0, 0, errMalformed
	}
	return s - seqBase, int64(t), nil
}

func digits(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}
