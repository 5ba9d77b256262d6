package churn_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// upstreamServer is an echo server that greets every connection, behind a fault
// proxy (tether dials the proxy), and that the fault loop restarts on the
// same port: while it is down, the proxy's dials to it are refused.
type upstreamServer struct {
	t     *testing.T
	addr  string
	proxy *upstreamtest.FaultProxy

	mu  sync.Mutex
	srv *upstreamtest.Server // nil while down
}

func newUpstream(t *testing.T) *upstreamServer {
	t.Helper()
	u := &upstreamServer{t: t, addr: "127.0.0.1:0"}
	u.start()
	u.addr = u.srv.Addr()
	fp, err := upstreamtest.NewFaultProxy(u.addr)
	if err != nil {
		t.Fatalf("upstreamtest.NewFaultProxy: %v", err)
	}
	u.proxy = fp
	t.Cleanup(func() {
		_ = fp.Close()
		u.stop()
	})
	return u
}

// URL is what tether dials: the fault proxy.
func (u *upstreamServer) URL() string { return u.proxy.URL() }

func (u *upstreamServer) start() {
	srv, err := upstreamtest.NewServer(upstreamtest.Options{Addr: u.addr, Greeting: greeting})
	if err != nil {
		u.t.Errorf("upstream restart on %s: %v", u.addr, err)
		return
	}
	u.mu.Lock()
	u.srv = srv
	u.mu.Unlock()
}

// stop closes the server and every connection it has (no close frame: the
// process died); idempotent.
func (u *upstreamServer) stop() {
	u.mu.Lock()
	srv := u.srv
	u.srv = nil
	u.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// The fault loop's pace: a fault every 250–750 ms, an upstream restart
// keeping it down for 50–300 ms.
const (
	faultEveryMin = 250 * time.Millisecond
	faultEveryMax = 750 * time.Millisecond
	downMin       = 50 * time.Millisecond
	downMax       = 300 * time.Millisecond
)

// faults resets every upstream connection or restarts the upstream, one
// at a time, until stop is closed; it leaves the upstream up. It returns
// how many of each it did.
type faults struct {
	resets, restarts int
}

func runFaults(u *upstreamServer, rng *rand.Rand, stop <-chan struct{}) faults {
	var f faults
	for pause(between(rng, faultEveryMin, faultEveryMax), stop) {
		if rng.IntN(2) == 0 {
			u.proxy.ResetAll()
			f.resets++
			continue
		}
		u.stop()
		u.proxy.ResetAll() // what the proxy still holds dies with the server
		pause(between(rng, downMin, downMax), stop)
		u.start()
		f.restarts++
	}
	return f
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// pause waits d; it reports false when stop was closed first.
func pause(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
