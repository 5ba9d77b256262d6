package storm

import "time"

// outcome is what one dial meets.
type outcome int

const (
	// refused: the server is not listening yet (a closed port, answered
	// at once with a TCP reset). A network error: transient, no floor.
	refused outcome = iota
	// rejected: the server listens but has used this tick's capacity;
	// admission control answers 503 at once, optionally with Retry-After.
	rejected
	// accepted: the handshake completes; the client is connected.
	accepted
)

// server is the admission model: closed until up, then at most capacity
// completed handshakes per one-second tick, the excess rejected fast. Ticks
// start at the loss (t=0), so they coincide with the histogram buckets and
// no bucket can count more than capacity accepted handshakes.
//
// Rejecting is modelled as free and instant, which is what admission control
// is for: the cost that matters is the completed handshake (TLS, auth,
// session restore), and that cost is what capacity bounds. Dials take no
// virtual time either: a round trip would shift every arrival by the same
// amount and change no peak.
type server struct {
	up       time.Duration
	capacity int
	tick     time.Duration // start of the tick whose admissions are counted
	admitted int           // handshakes completed in that tick
}

// dial returns what a handshake arriving at virtual time at meets. Calls
// must come in non-decreasing order of at, which the event queue guarantees.
func (s *server) dial(at time.Duration) outcome {
	if at < s.up {
		return refused
	}
	if tick := at.Truncate(Bucket); tick != s.tick {
		s.tick, s.admitted = tick, 0
	}
	if s.admitted >= s.capacity {
		return rejected
	}
	s.admitted++
	return accepted
}
