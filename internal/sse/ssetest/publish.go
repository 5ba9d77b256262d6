package ssetest

import (
	"strconv"
	"time"
)

// Event is an event to publish.
type Event struct {
	// Type is written as an "event" field; "" writes none. It must not
	// contain line breaks (use Raw for malformed streams).
	Type string
	// Data is written as one "data" line per line (split at CRLF, LF or
	// CR). Empty data is one empty "data" line.
	Data string
	// OmitID writes no "id" line. The event still takes the next number,
	// in the history too, so a client that resumes from an earlier id
	// receives it again.
	OmitID bool
}

// Publish numbers ev (ids rise from 1), keeps it in the history and queues
// it on every live stream that is not stalled. It returns the id.
func (s *Server) Publish(ev Event) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.hist.add(func(id uint64) []byte { return s.encode(id, ev) })
	b := s.hist.events[len(s.hist.events)-1]
	for st := range s.streams {
		if !st.stalled {
			s.queueEventLocked(st, b)
		}
	}
	return id
}

// Comment queues a comment (one comment line per line of text) on every
// live stream that is not stalled, and returns how many there were.
func (s *Server) Comment(text string) int {
	return s.broadcast(s.comment(text))
}

// Retry queues a "retry" field with d in milliseconds on every live stream
// that is not stalled, and returns how many there were.
func (s *Server) Retry(d time.Duration) int {
	return s.broadcast(s.retry(d))
}

// Raw queues b, as it is, on every live stream that is not stalled, and
// returns how many there were: for malformed or unusual streams (a BOM,
// a field without a colon, an id with NUL, a huge line).
func (s *Server) Raw(b string) int {
	return s.broadcast([]byte(b))
}

func (s *Server) broadcast(b []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for st := range s.streams {
		if !st.stalled {
			st.queueLocked(b)
			n++
		}
	}
	return n
}

// LastID returns the id of the latest published event, 0 before the first.
func (s *Server) LastID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hist.last
}

func (s *Server) encode(id uint64, ev Event) []byte {
	var b []byte
	if !ev.OmitID {
		b = s.line(b, "id: ", strconv.FormatUint(id, 10))
	}
	if ev.Type != "" {
		b = s.line(b, "event: ", ev.Type)
	}
	for _, l := range splitLines(ev.Data) {
		b = s.line(b, "data: ", l)
	}
	return append(b, s.le...)
}

func (s *Server) comment(text string) []byte {
	var b []byte
	for _, l := range splitLines(text) {
		b = s.line(b, ": ", l)
	}
	return b
}

func (s *Server) retry(d time.Duration) []byte {
	return s.line(nil, "retry: ", strconv.FormatInt(d.Milliseconds(), 10))
}

func (s *Server) line(b []byte, prefix, value string) []byte {
	b = append(b, prefix...)
	b = append(b, value...)
	return append(b, s.le...)
}

// splitLines cuts text at every CRLF, LF and CR. It always returns at
// least one line.
func splitLines(text string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(text); i++ {
		if c := text[i]; c != '\r' && c != '\n' {
			continue
		}
		lines = append(lines, text[start:i])
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		start = i + 1
	}
	return append(lines, text[start:])
}
