package demo

import (
	"context"
	"fmt"
	"net"

	"go.uber.org/zap"
)

// tetherProc is tether running in this process, in its own goroutine.
type tetherProc struct {
	stop  context.CancelFunc
	ready chan net.Addr
	done  chan struct{} // closed when run has returned; err is set then
	err   error
}

// startTether runs tether with env. Its context is detached from ctx's
// cancellation on purpose: on Ctrl-C the client must close first, because a
// draining tether closes the apps still connected with 1001, which the demo
// would rightly report as a close the client suffered.
func startTether(ctx context.Context, run TetherFunc, env map[string]string, log *zap.Logger) *tetherProc {
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p := &tetherProc{stop: stop, ready: make(chan net.Addr, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = run(tctx, env, log, p.ready)
	}()
	return p
}

// listening waits for tether's app address. It returns nil, nil when ctx
// ends first.
func (p *tetherProc) listening(ctx context.Context) (net.Addr, error) {
	select {
	case addr := <-p.ready:
		return addr, nil
	case <-p.done:
		if p.err != nil {
			return nil, fmt.Errorf("start tether: %w", p.err)
		}
		return nil, fmt.Errorf("start tether: %w", ErrTetherStopped)
	case <-ctx.Done():
		return nil, nil
	}
}

// shutdown stops tether (it drains) and waits for it.
func (p *tetherProc) shutdown() error {
	p.stop()
	<-p.done
	return p.err
}
