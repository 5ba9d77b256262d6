package sequence

import "time"

// Clock is where a Sequencer reads the time and arms its gap timers, so that
// tests run gap timeouts, fetch deadlines and the spacing of the
// "duplicates dropped" line in virtual time. The Sequencer reads it only
// when a gap is open or a duplicate waits to be reported: an in-order
// message with no gap open costs no clock read.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless the
	// returned Timer is stopped first, as time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer AfterFunc armed.
type Timer interface {
	// Stop prevents the timer from firing; it reports whether it did, false
	// when the timer had fired or been stopped already. It does not wait
	// for a callback under way.
	Stop() bool
}

// System is the Clock of package time.
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
