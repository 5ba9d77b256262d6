package churn_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/wsconn"
)

// The churn: sessions apps, concurrency at a time, each a kind and an ending
// in turn (session i is kind i%3 and ending (i/3)%4, so every pair is played
// as often). The warm-up runs the same churn, shorter, before the baseline.
const (
	sessions    = 10_000
	warmup      = 1_000
	concurrency = 64
)

// tether's configuration for the churn: short waits, so an app that meets a
// dead upstream leaves soon, and a short SSE linger, so a lingering
// session's end (its timer) is part of every sse:// session.
const (
	acceptWait  = 200 * time.Millisecond
	dialTimeout = time.Second
	backoffBase = 10 * time.Millisecond
	backoffCap  = 100 * time.Millisecond
	sseLinger   = 100 * time.Millisecond
	// maxSessions leaves room for the apps that left but whose sessions
	// are still ending (an SSE linger, a close handshake) and are counted
	// until then.
	maxSessions = 8 * concurrency
	ssePath     = "/events"
	// slack covers scheduling delays on a loaded machine.
	slack = time.Second
)

// connectWait bounds an app's wait to connect and for its handshake's
// answer: tether accepts it at most acceptWait after the request even with
// the upstream down (slack covers a machine this busy).
const connectWait = acceptWait + slack

// answerWait bounds an app's wait for the answer to its message once
// accepted: a message queued while the upstream is down goes out at most a
// backoff after it returns (slack again for the machine). An app whose
// message went down with an upstream connection gets no answer and leaves
// when this passes, which is churn as good as any (without acks tether
// relays at most once).
const answerWait = acceptWait + backoffCap + slack

// endBound is how long a session may outlive its app: its first dial may
// still be running (dialTimeout), a closing handshake waits at most
// wsconn.DefaultCloseWait (the app's, then the upstream's), and an sse://
// session lingers sseLinger for its app's return.
const endBound = dialTimeout + 2*wsconn.DefaultCloseWait + sseLinger + slack

// tetherEnv is the configuration above as TETHER_* variables.
func tetherEnv(upstreamURL string) map[string]string {
	return map[string]string{
		"TETHER_UPSTREAM_URL":  upstreamURL,
		"TETHER_LISTEN":        "127.0.0.1:0,tcp://127.0.0.1:0,sse://127.0.0.1:0" + ssePath,
		"TETHER_ACCEPT_WAIT":   acceptWait.String(),
		"TETHER_DIAL_TIMEOUT":  dialTimeout.String(),
		"TETHER_BACKOFF_BASE":  backoffBase.String(),
		"TETHER_BACKOFF_CAP":   backoffCap.String(),
		"TETHER_SSE_LINGER":    sseLinger.String(),
		"TETHER_MAX_SESSIONS":  fmt.Sprint(maxSessions),
		"TETHER_STABLE_AFTER":  "50ms",
		"TETHER_PING_INTERVAL": "0",
	}
}

// tally is what the apps of one churn did, by kind and ending.
type tally struct {
	mu       sync.Mutex
	played   [numKinds][numEndings]int
	answered [numKinds][numEndings]int
	gaveUp   int // errGaveUp
	errs     []string
	errCount int
}

func (tl *tally) add(k appKind, e ending, answered bool, err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.played[k][e]++
	if answered {
		tl.answered[k][e]++
	}
	switch {
	case errors.Is(err, errGaveUp):
		tl.gaveUp++
	case err != nil:
		tl.errCount++
		if len(tl.errs) < 5 {
			tl.errs = append(tl.errs, fmt.Sprintf("%s/%s: %v", k, e, err))
		}
	}
}

func (tl *tally) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	s := ""
	for k := range numKinds {
		s += k.String() + ":"
		for e := range numEndings {
			s += fmt.Sprintf(" %s %d/%d", e, tl.answered[k][e], tl.played[k][e])
		}
		s += "; "
	}
	return s + fmt.Sprintf("(answered/played); %d gave up waiting to connect", tl.gaveUp)
}

// churn plays n sessions against tg, concurrency at a time, while the
// fault loop resets and restarts the upstream; it returns when every app
// is done and the fault loop has stopped, leaving the upstream up.
func churn(t *testing.T, tg targets, u *upstreamServer, n int, seed uint64) (*tally, faults) {
	t.Helper()
	stop := make(chan struct{})
	faultsDone := make(chan faults, 1)
	go func() { faultsDone <- runFaults(u, rand.New(rand.NewPCG(seed, seed^0x5bd1e995)), stop) }()

	tl := &tally{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				k, e := appKind(i%int(numKinds)), ending(i/int(numKinds)%int(numEndings))
				answered, err := runApp(tg, k, e, i, connectWait)
				tl.add(k, e, answered, err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	f := <-faultsDone
	if tl.errCount > 0 {
		t.Errorf("%d of %d apps could not play their part, first: %v", tl.errCount, n, tl.errs)
	}
	return tl, f
}

// holdOpen connects n apps, the kinds in turn, each answered (the upstream
// is up and no fault runs), and returns a func that closes them cleanly.
func holdOpen(t *testing.T, tg targets, n int) (closeAll func()) {
	t.Helper()
	var conns []net.Conn
	closeAll = func() {
		for i, c := range conns {
			if appKind(i%int(numKinds)) == kindWS {
				closeWS(c)
			}
			_ = c.Close()
		}
	}
	for i := range n {
		k := appKind(i % int(numKinds))
		c, answered, err := openApp(tg, k, i, connectWait)
		if c == nil || !answered {
			closeAll()
			if c != nil {
				_ = c.Close()
			}
			t.Fatalf("app %d (%s) not answered with the upstream up: %v", i, k, err)
		}
		_ = c.SetDeadline(time.Now().Add(connectWait)) // for closeWS
		conns = append(conns, c)
	}
	return closeAll
}
