package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/gapfill"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// shutdownGrace is added to TETHER_DRAIN_TIMEOUT for the last closing
// handshakes to finish before the remaining connections are cut.
const shutdownGrace = 5 * time.Second

// runSidecar loads the configuration and runs the proxy until ctx ends.
func runSidecar(ctx context.Context, env map[string]string, stderr io.Writer) error {
	cfg, err := LoadConfig(env)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.LogLevel, cfg.LogFormat, stderr)
	if err != nil {
		return &configError{Err: err}
	}
	defer func() { _ = log.Sync() }()
	return serveProxy(ctx, cfg, log, nil)
}

// serveProxy listens, serves apps and the admin server, and drains on ctx's end.
// ready, when not nil, receives the bound app address once listening (tests,
// demo).
func serveProxy(ctx context.Context, cfg Config, log *zap.Logger, ready chan<- net.Addr) error {
	opts, err := proxyOptions(cfg, log)
	if err != nil {
		return &configError{Err: err}
	}
	if c := opts.Rules.Sequences.GapFill; c != nil {
		defer c.Close() // after the drain: no session fetches any more
	}
	reg, m, err := newMetrics()
	if err != nil {
		return err
	}
	instrument(&opts, cfg, m)
	srv, err := proxy.New(opts)
	if err != nil {
		return err
	}
	m.SetOutboxSource(srv.OutboxMessages)
	ln, err := net.Listen("tcp", string(cfg.Listen))
	if err != nil {
		return fmt.Errorf("listen on TETHER_LISTEN=%s: %w", cfg.Listen, err)
	}
	if !cfg.Listen.IsLoopback() {
		log.Warn("TETHER_LISTEN is not a loopback address: any host that reaches it can use the upstream credentials",
			zap.String("listen", string(cfg.Listen)))
	}
	if cfg.AllowedOrigins.allowsAny() {
		log.Warn("TETHER_ALLOWED_ORIGINS=*: every web page the user opens can use the upstream credentials")
	}
	admin := newAdminServer(string(cfg.AdminListen), readiness(cfg, srv, opts.Upstream, log), metricsHandler(reg, log), log)
	if cfg.AdminListen != "" {
		if _, err := admin.Start(); err != nil {
			_ = ln.Close()
			return fmt.Errorf("admin server on TETHER_ADMIN_LISTEN=%s: %w", cfg.AdminListen, err)
		}
	}
	log.Info("tether started", zap.Stringer("listen", ln.Addr()),
		zap.String("upstream", cfg.RedactedUpstreamURL()), zap.String("version", versionString()))
	if ready != nil {
		ready <- ln.Addr()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	return errors.Join(serveErr, drain(srv, admin, cfg, log, served, serveErr != nil))
}

// drain stops accepting, closes apps with 1001 over TETHER_DRAIN_TIMEOUT and
// upstreams with 1000, then stops the admin server.
func drain(srv *proxy.Server, admin *adminServer, cfg Config, log *zap.Logger, served <-chan error, serveDone bool) error {
	log.Info("shutting down", zap.Duration("drain_timeout", cfg.DrainTimeout), zap.Int("sessions", srv.Sessions()))
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout+shutdownGrace)
	defer cancel()
	err := srv.Shutdown(ctx, cfg.DrainTimeout)
	if !serveDone {
		<-served
	}
	if aerr := admin.Shutdown(ctx); aerr != nil {
		err = errors.Join(err, aerr)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// proxyOptions maps the configuration onto the packages' options.
func proxyOptions(cfg Config, log *zap.Logger) (proxy.Options, error) {
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		return proxy.Options{}, err
	}
	up := upstream.Options{
		URL:       cfg.UpstreamURL.String(),
		Header:    cfg.Header(),
		TokenFile: cfg.UpstreamTokenFile,
		TLSConfig: tlsConfig,

		DialTimeout: cfg.DialTimeout,
		Backoff:     upstream.Backoff{Jitter: cfg.BackoffJitter, Base: cfg.BackoffBase, Cap: cfg.BackoffCap},
		StableAfter: cfg.StableAfter,
		Close: upstream.ClosePolicy{
			Permanent: cfg.PermanentCodes, Reauth: cfg.ReauthCodes,
			RestartFloor: cfg.RestartFloor, TryAgainFloor: cfg.TryAgainFloor,
		},
		MaxAttempts:      cfg.MaxAttempts,
		AuthFailuresMax:  cfg.AuthFailuresMax,
		PingInterval:     cfg.PingInterval,
		PingTimeout:      cfg.PingTimeout,
		HeartbeatMessage: []byte(cfg.HeartbeatMessage),
		MaxMessageBytes:  int64(cfg.MaxMessageBytes),
	}
	if cfg.ConfirmMatch != nil {
		up.Confirm = cfg.ConfirmMatch.Match
	}
	if cfg.HeartbeatReplyMatch != nil {
		up.HeartbeatReply = cfg.HeartbeatReplyMatch.Match
	}
	rules := restoreRules(cfg)
	rules.Sequences = sequenceRules(cfg, up)
	return proxy.Options{
		Upstream:              up,
		AcceptWait:            cfg.AcceptWait,
		OutboxMaxMessages:     cfg.OutboxMaxMessages,
		OutboxMaxBytes:        int(cfg.OutboxMaxBytes),
		OutboxOverflow:        cfg.OutboxOverflow,
		MaxSessions:           cfg.MaxSessions,
		MaxMessageBytes:       int64(cfg.MaxMessageBytes),
		DownstreamBufferBytes: int64(cfg.DownstreamBufferBytes),
		Logger:                log.Named("proxy"),
		Rules:                 rules,
		AllowedOrigins:        cfg.AllowedOrigins,
		AllowedHosts:          cfg.Listen.allowedHosts(),
	}, nil
}

// restoreRules maps the TETHER_*_MATCH and *_PATH variables that restore the
// app on new connections onto the proxy's rules.
func restoreRules(cfg Config) proxy.Rules {
	return proxy.Rules{
		AuthMatch:            cfg.AuthMatch,
		AuthOKMatch:          cfg.AuthOKMatch,
		SubscribeMatch:       cfg.SubscribeMatch,
		UnsubscribeMatch:     cfg.UnsubscribeMatch,
		SubscriptionKey:      cfg.SubscriptionKey,
		ReplyIDPath:          cfg.ReplyIDPath,
		HideOnReconnectMatch: cfg.HideOnReconnectMatch,
		AckIDPath:            cfg.AckIDPath,
		AckMatch:             cfg.AckMatch,
	}
}

// sequenceRules maps the sequence variables onto the proxy's rules. With
// TETHER_GAPFILL_URL set, the one HTTP client all sessions share fetches
// with the upstream's credentials: its static headers, the token file
// (re-read on every request) and its TLS settings; one request may take the
// whole gap timeout.
func sequenceRules(cfg Config, up upstream.Options) proxy.Sequences {
	s := proxy.Sequences{
		SessionMatch:  cfg.SessionMatch,
		SessionPath:   cfg.SessionPath,
		ResumeMessage: cfg.ResumeMessage,
		SeqPath:       cfg.SeqPath,
		StreamPath:    cfg.StreamPath,
		ResyncMatch:   cfg.ResyncMatch,
		ResyncSeqPath: cfg.ResyncSeqPath,
		GapFillURL:    cfg.GapFillURL,
		GapTimeout:    cfg.GapTimeout,
		GapPolicy:     cfg.GapPolicy,
		GapNotice:     cfg.GapNotice,
		HoldMaxBytes:  int(cfg.HoldMaxBytes),
	}
	if cfg.GapFillURL.IsSet() {
		s.GapFill = gapfill.NewClient(gapfill.Options{
			Header:    up.Header.Clone(),
			TokenFile: up.TokenFile,
			TLS:       up.TLSConfig,
			Timeout:   cfg.GapTimeout,
		})
	}
	return s
}
