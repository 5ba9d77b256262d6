package storm

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The conformance test runs a real upstream.Client against a loopback server
// through the failures a simulated client meets, and checks that the client
// chose exactly the delays the simulated client computes from the same
// random draws. It is what makes the simulation's numbers the real code's
// numbers: if upstream.Client ever passed other arguments to the backoff
// (attempt counted from one, the previous delay not fed back, a floor
// dropped), this test fails.

const welcome = "welcome"

// step is one handshake of the script: the status the server answers (0
// accepts) and, for a 503, its Retry-After.
type step struct {
	status     int
	retryAfter time.Duration
}

// script: a confirmed connection closed with 1012, then 503s (one of them
// with Retry-After, whose floor is the only real wait of the test), then a
// connection that stays.
var script = []step{
	{status: 0},
	{status: http.StatusServiceUnavailable},
	{status: http.StatusServiceUnavailable},
	{status: http.StatusServiceUnavailable, retryAfter: time.Second},
	{status: http.StatusServiceUnavailable},
	{status: 0},
}

func TestConformance(t *testing.T) {
	for _, j := range []upstream.Jitter{upstream.JitterFull, upstream.JitterEqual, upstream.JitterDecorrelated, upstream.JitterNone} {
		t.Run(j.String(), func(t *testing.T) {
			t.Parallel()
			b := upstream.Backoff{Jitter: j, Base: 2 * time.Millisecond, Cap: 16 * time.Millisecond}
			policy := upstream.ClosePolicy{RestartFloor: 3 * time.Millisecond, TryAgainFloor: 7 * time.Millisecond}
			got := realDelays(t, b, policy)
			want := simulatedDelays(t, b, policy)
			if !slices.Equal(got, want) {
				t.Errorf("upstream.Client waited %v, the simulated client %v", got, want)
			}
		})
	}
}

// draws is a fixed sequence of "random" numbers, cycled; each caller gets
// its own copy so the real and the simulated client see the same draws.
func draws() func() float64 {
	seq := []float64{0.91, 0.07, 0.55, 0.33, 0.78, 0.14, 0.62}
	i := 0
	return func() float64 {
		v := seq[i%len(seq)]
		i++
		return v
	}
}

// simulatedDelays feeds the script's failures to the simulated client.
func simulatedDelays(t *testing.T, b upstream.Backoff, policy upstream.ClosePolicy) []time.Duration {
	t.Helper()
	b.Rand = draws()
	var c client
	floor, err := lossFloor(policy, 1012)
	if err != nil {
		t.Fatal(err)
	}
	delays := []time.Duration{c.fail(b, floor)}
	for _, s := range script[1 : len(script)-1] {
		floor, err := rejectFloor(s.retryAfter)
		if err != nil {
			t.Fatal(err)
		}
		delays = append(delays, c.fail(b, floor))
	}
	return delays
}

// realDelays runs upstream.Client through the script and returns the delay
// of every reconnect it logged.
func realDelays(t *testing.T, b upstream.Backoff, policy upstream.ClosePolicy) []time.Duration {
	t.Helper()
	srv, err := upstreamtest.NewServer(upstreamtest.Options{Handshake: answer, OnConn: serve})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	b.Rand = draws()
	core, logs := observer.New(zapcore.InfoLevel)
	confirmed := make(chan struct{}, len(script))
	c, err := upstream.New(upstream.Options{
		URL:             srv.URL(),
		DialTimeout:     5 * time.Second,
		Backoff:         b,
		Close:           policy,
		Confirm:         func(msg []byte) bool { return string(msg) == welcome },
		AuthFailuresMax: 1,
		Handler:         nopHandler{},
		Logger:          zap.New(core),
		OnState: func(s upstream.State) {
			if s == upstream.StateConfirmed {
				confirmed <- struct{}{}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Start(ctx)
	defer c.Close()
	for range 2 { // the first connection, then the last
		select {
		case <-confirmed:
		case <-ctx.Done():
			t.Fatalf("client not confirmed twice: %d handshakes, logs %v", srv.Handshakes(), logs.All())
		}
	}
	return loggedDelays(logs)
}

// loggedDelays collects the "delay" field of every log entry that has one:
// docs/design.md asks for one line per reconnect with the delay chosen.
func loggedDelays(logs *observer.ObservedLogs) []time.Duration {
	var out []time.Duration
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if f.Key == "delay" && f.Type == zapcore.DurationType {
				out = append(out, time.Duration(f.Integer))
			}
		}
	}
	return out
}

// answer is the server's handshake decision, following the script.
func answer(h upstreamtest.Handshake) (int, http.Header) {
	if h.N > len(script) {
		return http.StatusServiceUnavailable, nil
	}
	s := script[h.N-1]
	if s.retryAfter == 0 {
		return s.status, nil
	}
	return s.status, http.Header{"Retry-After": {strconv.FormatInt(int64(s.retryAfter/time.Second), 10)}}
}

// serve confirms every connection; the first is then closed with 1012, the
// last held open until the client goes away.
func serve(c *upstreamtest.Conn) {
	if c.Send(welcome) != nil {
		return
	}
	if c.N() == 1 {
		_ = c.CloseWith(1012, "restart") // Service Restart
		return
	}
	<-c.Done()
}

// nopHandler restores nothing and drops messages: only timing matters here.
type nopHandler struct{}

func (nopHandler) Restore(context.Context, *upstream.Conn) error { return nil }
func (nopHandler) Message(*upstream.Conn, ws.OpCode, []byte)     {}
func (nopHandler) Flush(*upstream.Conn)                          {}
func (nopHandler) Lost(*upstream.Conn, error)                    {}
