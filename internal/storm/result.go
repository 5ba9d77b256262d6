package storm

import (
	"fmt"
	"strings"
	"time"
)

// Result is what one run measured. Times are virtual, since the loss.
type Result struct {
	Scenario      string
	Strategy      string
	TetherDefault bool // the strategy is tether's default setting
	Clients       int
	// Connected counts clients whose handshake completed; equal to Clients
	// unless the run hit Config.Horizon.
	Connected int
	// Peak is the most handshakes that reached the listening server in one
	// one-second bucket, accepted and rejected together: the "reconnects
	// per second" a load balancer in front of it would show. PeakAt is the
	// start of the first bucket holding that many.
	Peak   int
	PeakAt time.Duration
	// Half is when half the clients (rounded up) were connected, Recovery
	// when the last one was; each is 0 when the run ended first.
	Half     time.Duration
	Recovery time.Duration
	// Attempts counts every dial; Refused the dials made while the server
	// was not listening, Rejected the 503s. Attempts = Refused + Rejected +
	// Connected.
	Attempts int
	Refused  int
	Rejected int
	// Arrivals[i] counts the handshakes that reached the listening server
	// during [i s, i+1 s); Accepted[i] those of them that completed. Both
	// end at the last bucket with an arrival.
	Arrivals []int
	Accepted []int
}

// Recovered reports whether every client reconnected within the horizon.
func (r Result) Recovered() bool { return r.Connected == r.Clients }

// HalfRecovered reports whether half the clients reconnected within the
// horizon, that is whether Half is set.
func (r Result) HalfRecovered() bool { return r.Connected >= (r.Clients+1)/2 }

// record books one dial at virtual time at.
func (r *Result) record(at time.Duration, o outcome) {
	r.Attempts++
	if o == refused {
		r.Refused++
		return
	}
	i := int(at / Bucket)
	for len(r.Arrivals) <= i {
		r.Arrivals = append(r.Arrivals, 0)
		r.Accepted = append(r.Accepted, 0)
	}
	r.Arrivals[i]++
	if o == rejected {
		r.Rejected++
		return
	}
	r.Accepted[i]++
	r.Connected++
	if r.Connected == (r.Clients+1)/2 {
		r.Half = at
	}
	if r.Connected == r.Clients {
		r.Recovery = at
	}
}

// finish derives the peak from the histogram.
func (r *Result) finish() {
	for i, n := range r.Arrivals {
		if n > r.Peak {
			r.Peak, r.PeakAt = n, time.Duration(i)*Bucket
		}
	}
}

// Table renders results as a Markdown table, one row per result, marking
// tether's default strategy in bold.
func Table(results []Result) string {
	var b strings.Builder
	b.WriteString("| scenario | strategy | peak arrivals/s (at) | half connected | all connected | attempts | 503s |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		name := r.Strategy
		if r.TetherDefault {
			name = "**" + name + "**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s (%s) | %s | %s | %s | %s |\n",
			r.Scenario, name, thousands(r.Peak), seconds(r.PeakAt), half(r),
			recovery(r), thousands(r.Attempts), thousands(r.Rejected))
	}
	return b.String()
}

func half(r Result) string {
	if !r.HalfRecovered() {
		return "–"
	}
	return seconds(r.Half)
}

func recovery(r Result) string {
	if !r.Recovered() {
		return fmt.Sprintf("not all (%s left)", thousands(r.Clients-r.Connected))
	}
	return seconds(r.Recovery)
}

// seconds formats a virtual time as seconds with one decimal.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// thousands formats n with comma separators, as the seeds' figures are
// written.
func thousands(n int) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
