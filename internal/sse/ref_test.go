package sse

import (
	"math"
	"math/big"
	"strings"
	"time"
)

// This file is a second, deliberately naive implementation of the standard,
// written straight from its prose and used as the oracle of FuzzReader. It
// works on the whole input at once: decode every byte (Encoding standard,
// "UTF-8 decode"), split the text into lines, then run 9.2.6's steps on
// each line with plain string operations. It shares no code with the
// streaming Reader.

// refDecode is the Encoding standard's "UTF-8 decode": strip one leading
// BOM, then run the UTF-8 decoder's byte handler, step by step, with
// replacement error mode.
func refDecode(in []byte) string {
	if len(in) >= 3 && in[0] == 0xEF && in[1] == 0xBB && in[2] == 0xBF {
		in = in[3:]
	}
	var out []rune
	var cp rune
	needed, seen := 0, 0
	lower, upper := byte(0x80), byte(0xBF)
	for i := 0; ; {
		if i == len(in) { // end-of-queue
			if needed != 0 {
				out = append(out, 0xFFFD)
			}
			return string(out)
		}
		b := in[i]
		i++
		if needed == 0 {
			switch {
			case b <= 0x7F:
				out = append(out, rune(b))
			case b >= 0xC2 && b <= 0xDF:
				needed, cp = 1, rune(b&0x1F)
			case b >= 0xE0 && b <= 0xEF:
				if b == 0xE0 {
					lower = 0xA0
				}
				if b == 0xED {
					upper = 0x9F
				}
				needed, cp = 2, rune(b&0xF)
			case b >= 0xF0 && b <= 0xF4:
				if b == 0xF0 {
					lower = 0x90
				}
				if b == 0xF4 {
					upper = 0x8F
				}
				needed, cp = 3, rune(b&0x7)
			default:
				out = append(out, 0xFFFD)
			}
			continue
		}
		if b < lower || b > upper {
			cp, needed, seen, lower, upper = 0, 0, 0, 0x80, 0xBF
			i-- // "restore byte to ioQueue"
			out = append(out, 0xFFFD)
			continue
		}
		lower, upper = 0x80, 0xBF
		cp = cp<<6 | rune(b&0x3F)
		seen++
		if seen != needed {
			continue
		}
		out = append(out, cp)
		cp, needed, seen = 0, 0, 0
	}
}

// refLines splits decoded text into lines ending at CRLF, LF or CR. Text
// after the last line end is not a line: the stream ended inside it.
func refLines(text string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\n':
			lines = append(lines, text[start:i])
			start = i + 1
		case '\r':
			lines = append(lines, text[start:i])
			if i+1 < len(text) && text[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	return lines
}

// refStream is the state 9.2.6 associates with a stream.
type refStream struct {
	data, eventType, idBuffer string
	lastEventID               string
	retry                     time.Duration
	hasRetry                  bool
	items                     []Item
}

// refParse interprets input. seedID initialises the last event ID buffer
// and string, as Options.LastEventID does.
func refParse(input []byte, seedID string) *refStream {
	s := &refStream{idBuffer: seedID, lastEventID: seedID}
	for _, line := range refLines(refDecode(input)) {
		s.line(line)
	}
	return s // end of file: whatever is pending is discarded
}

func (s *refStream) line(line string) {
	switch {
	case line == "":
		s.dispatch()
	case strings.HasPrefix(line, ":"):
		s.items = append(s.items, Item{Kind: KindComment, Comment: strings.TrimPrefix(line[1:], " ")})
	case strings.Contains(line, ":"):
		field, value, _ := strings.Cut(line, ":")
		s.field(field, strings.TrimPrefix(value, " "))
	default:
		s.field(line, "")
	}
}

func (s *refStream) field(name, value string) {
	switch name {
	case "event":
		s.eventType = value
	case "data":
		s.data += value + "\n"
	case "id":
		if !strings.Contains(value, "\x00") {
			s.idBuffer = value
		}
	case "retry":
		if value != "" && strings.Trim(value, "0123456789") == "" {
			s.retry, s.hasRetry = refMillis(value), true
			s.items = append(s.items, Item{Kind: KindRetry, Retry: s.retry})
		}
	}
}

// refMillis reads a decimal number of milliseconds of any length,
// saturating at the largest time.Duration.
func refMillis(v string) time.Duration {
	n, _ := new(big.Int).SetString(v, 10)
	n.Mul(n, big.NewInt(int64(time.Millisecond)))
	if !n.IsInt64() {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(n.Int64())
}

func (s *refStream) dispatch() {
	old := s.lastEventID
	s.lastEventID = s.idBuffer
	if s.data == "" {
		s.eventType = ""
		if s.lastEventID != old {
			s.items = append(s.items, Item{Kind: KindID, LastEventID: s.lastEventID})
		}
		return
	}
	data := strings.TrimSuffix(s.data, "\n")
	ev := Event{Type: "message", Data: data, ID: s.lastEventID}
	if s.eventType != "" {
		ev.Type = s.eventType
	}
	s.data, s.eventType = "", ""
	s.items = append(s.items, Item{Kind: KindEvent, Event: ev})
}
