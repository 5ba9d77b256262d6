package main

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// readyProbeTTL is how long an upstream probe's result answers /readyz. The
// kubelet probes every few seconds, possibly from several probes at once; a
// probe dial per request would hammer an upstream that is already struggling.
const readyProbeTTL = 5 * time.Second

// readiness is the /readyz check: the proxy accepts apps and is not draining,
// and, with TETHER_READY_REQUIRES_UPSTREAM, the upstream accepted a probe dial
// made with the sessions' own options (URL, headers, token, TLS).
func readiness(cfg config.Config, srv *proxy.Server, up upstream.Options, log *zap.Logger) func(context.Context) error {
	if !cfg.ReadyRequiresUpstream {
		return func(context.Context) error { return srv.Ready() }
	}
	p := newUpstreamProbe(func(ctx context.Context) error { return upstream.Probe(ctx, up) },
		readyProbeTTL, time.Now, log.Named("ready"))
	return func(ctx context.Context) error {
		if err := srv.Ready(); err != nil {
			return err
		}
		return p.check(ctx)
	}
}

// upstreamProbe runs one probe dial at a time and shares its result with every
// check made within ttl.
//
// Concurrency: check is safe for concurrent use. sem admits one check at a
// time; a waiting check gives up when its request's context ends, which a
// mutex could not do. The fields below sem are guarded by it.
type upstreamProbe struct {
	dial func(context.Context) error
	ttl  time.Duration
	now  func() time.Time
	log  *zap.Logger

	sem     chan struct{}
	checked time.Time // when err was found; zero before the first probe
	err     error
}

func newUpstreamProbe(dial func(context.Context) error, ttl time.Duration, now func() time.Time, log *zap.Logger) *upstreamProbe {
	return &upstreamProbe{dial: dial, ttl: ttl, now: now, log: log, sem: make(chan struct{}, 1)}
}

// check returns the cached result while it is fresh, otherwise probes now.
func (p *upstreamProbe) check(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("upstream probe: %w", ctx.Err())
	}
	defer func() { <-p.sem }()
	if !p.checked.IsZero() && p.now().Sub(p.checked) < p.ttl {
		return p.err
	}
	err := p.dial(ctx)
	if err != nil && ctx.Err() != nil {
		// The prober hung up: that says nothing about the upstream.
		return fmt.Errorf("upstream probe: %w", ctx.Err())
	}
	if err != nil {
		err = fmt.Errorf("upstream probe failed: %w", err)
	}
	p.logChange(err)
	p.checked, p.err = p.now(), err
	return err
}

// logChange logs the first result and every change between success and
// failure, not every probe.
func (p *upstreamProbe) logChange(err error) {
	first := p.checked.IsZero()
	switch {
	case err != nil && (first || p.err == nil):
		p.log.Warn("upstream probe failed, not ready", zap.Error(err))
	case err == nil && (first || p.err != nil):
		p.log.Info("upstream probe succeeded, ready")
	}
}
