package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/internal/gapfill"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/status"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// shutdownGrace is added to TETHER_DRAIN_TIMEOUT for the last closing
// handshakes to finish before the remaining connections are cut.
const shutdownGrace = 5 * time.Second

// runSidecar loads the configuration and runs the proxy until ctx ends.
// Variables of TETHER_ENV_FILE count as set in the environment, under it.
func runSidecar(ctx context.Context, env map[string]string, stderr io.Writer) error {
	env, origins, err := config.WithEnvFile(env)
	if err != nil {
		return &config.Error{Err: err}
	}
	cfg, err := config.Load(env)
	if err != nil {
		config.AnnotateOrigins(err, origins)
		return err
	}
	log, err := newLogger(cfg.LogLevel, cfg.LogFormat, stderr)
	if err != nil {
		return &config.Error{Err: err}
	}
	defer func() { _ = log.Sync() }()
	plan, err := planMemory(cfg, systemCgroup, env)
	if err != nil {
		return &config.Error{Err: err}
	}
	plan.apply(cfg, log)
	return servePlanned(ctx, cfg, plan, log, nil)
}

// serveProxy is servePlanned with the memory budget planned from cfg and
// the cgroup the process sees, GOMEMLIMIT left alone (tests, demo).
// ready, when not nil, receives the bound address of the first TETHER_LISTEN
// entry once every listener is open.
func serveProxy(ctx context.Context, cfg config.Config, log *zap.Logger, ready chan<- net.Addr) error {
	plan, err := planMemory(cfg, systemCgroup, map[string]string{"GOMEMLIMIT": "unchanged"})
	if err != nil {
		return &config.Error{Err: err}
	}
	return servePlanned(ctx, cfg, plan, log, ready)
}

// servePlanned listens, serves apps and the admin server under the memory
// budget plan, and drains on ctx's end.
func servePlanned(ctx context.Context, cfg config.Config, plan memoryPlan, log *zap.Logger, ready chan<- net.Addr) error {
	opts, err := proxyOptions(cfg, log)
	if err != nil {
		return &config.Error{Err: err}
	}
	if opts.Budget, err = plan.newBudget(cfg); err != nil {
		return &config.Error{Err: err}
	}
	stopWatch := watchResumes(ctx, &opts, log)
	defer stopWatch()
	if c := opts.Sequences.GapFill; c != nil {
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
	m.SetMemorySource(opts.Budget)
	stopBudgetWatch := watchBudget(ctx, opts.Budget, budgetWatchEvery, log.Named("memory"))
	defer stopBudgetWatch()
	lns, err := openListeners(cfg.Listen, cfg.UnixSocketMode, log)
	if err != nil {
		return err
	}
	warnSettings(cfg, log)
	admin := newAdminServer(string(cfg.AdminListen), adminHandlers{
		Ready:    readiness(cfg, srv, opts.Upstream, log),
		Pressure: func() string { return status.MemoryOf(opts.Budget).Pressure() },
		Metrics:  metricsHandler(reg, log),
		Status:   newStatusSource(srv, cfg),
	}, log)
	if cfg.AdminListen != "" {
		if _, err := admin.Start(); err != nil {
			closeListeners(lns)
			return fmt.Errorf("admin server on TETHER_ADMIN_LISTEN=%s: %w", cfg.AdminListen, err)
		}
	}
	logStarted(cfg, lns, log)
	if ready != nil {
		ready <- lns[0].ln.Addr()
	}
	served := make(chan error, len(lns))
	for _, l := range lns {
		go func() { served <- srv.ServeKind(l.ln, l.spec.Kind) }()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	pending := len(lns)
	if serveErr != nil {
		pending--
	}
	return errors.Join(serveErr, drain(srv, admin, cfg, log, served, pending))
}

// watchResumes starts the watch for resumes from sleep that every session's
// upstream client listens to (upstream.Resumes: a laptop's dead connections
// are probed at once when it wakes, not when the heartbeat, whose timers
// did not count the sleep, comes due). The returned stop ends the watch and
// waits for it.
func watchResumes(ctx context.Context, opts *proxy.Options, log *zap.Logger) (stop func()) {
	resumes := upstream.NewResumes()
	opts.Upstream.Resume = resumes
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resumes.Watch(wctx, upstream.WatchOptions{Logger: log.Named("upstream")})
	}()
	return func() { cancel(); <-done }
}

// logStarted writes one "listening" line per listener, then "tether
// started" with the first listener's address in listen (what scripts and
// the demo read) and every listener in listeners.
func logStarted(cfg config.Config, lns []openListener, log *zap.Logger) {
	all := make([]string, len(lns))
	for i, l := range lns {
		all[i] = string(l.spec.Kind) + "://" + l.ln.Addr().String() + l.spec.Path
		log.Info("listening", zap.String("kind", string(l.spec.Kind)), zap.Stringer("addr", l.ln.Addr()),
			zap.String("entry", l.spec.String()))
	}
	log.Info("tether started", zap.Stringer("listen", lns[0].ln.Addr()), zap.Strings("listeners", all),
		zap.String("upstream", cfg.RedactedUpstreamURL()), zap.Stringer("upstream_kind", cfg.Kind()),
		zap.String("upstream_proxy", cfg.UpstreamProxyText()),
		zap.String("version", versionString()))
}

// warnSettings logs, once at start, settings that expose the credentials and
// settings that have no effect with the listeners configured (a setting that
// silently does nothing costs an operator hours; refusing them would break a
// Helm chart that renders every value).
func warnSettings(cfg config.Config, log *zap.Logger) {
	for _, ln := range cfg.Listen {
		if !ln.IsLoopback() {
			log.Warn("TETHER_LISTEN is not a loopback address: any host that reaches it can use the upstream credentials",
				zap.String("listen", ln.String()))
		}
	}
	if cfg.AllowedOrigins.AllowsAny() {
		log.Warn("TETHER_ALLOWED_ORIGINS=*: every web page the user opens can use the upstream credentials")
	}
	for _, name := range ineffectiveSettings(cfg) {
		log.Warn("setting has no effect with the configured listeners", zap.String("variable", name),
			zap.String("listen", cfg.Listen.String()))
	}
	if cfg.Kind() == upstream.KindWebSocket && cfg.SSEFormat != upstream.SSEJSON {
		log.Warn("setting has no effect with a WebSocket upstream", zap.String("variable", "TETHER_SSE_FORMAT"))
	}
	if cfg.Kind() == upstream.KindSSE && cfg.UpstreamCompression != upstream.CompressionAuto {
		log.Warn("setting has no effect with an SSE upstream", zap.String("variable", "TETHER_UPSTREAM_COMPRESSION"))
	}
}

// defaultSSELinger is TETHER_SSE_LINGER's default (its envDefault tag).
const defaultSSELinger = 30 * time.Second

// ineffectiveSettings names variables set away from their defaults that no
// configured listener uses.
func ineffectiveSettings(cfg config.Config) []string {
	var names []string
	if !cfg.Listen.Has(proxy.ListenerTCP) {
		if cfg.TCPBinary != proxy.BinaryBase64 {
			names = append(names, "TETHER_TCP_BINARY")
		}
		if cfg.TCPNewline != proxy.NewlineSpace {
			names = append(names, "TETHER_TCP_NEWLINE")
		}
	}
	if !cfg.Listen.Has(proxy.ListenerUnix) && cfg.UnixSocketMode != config.DefaultSocketMode {
		names = append(names, "TETHER_UNIX_SOCKET_MODE")
	}
	if !cfg.Listen.Has(proxy.ListenerSSE) && cfg.SSELinger != defaultSSELinger {
		names = append(names, "TETHER_SSE_LINGER")
	}
	if cfg.ForwardPath && !cfg.Listen.Has(proxy.ListenerWS) && !cfg.Listen.Has(proxy.ListenerUnix) {
		names = append(names, "TETHER_FORWARD_PATH")
	}
	return names
}

// drain stops accepting on every listener, closes apps with 1001 over
// TETHER_DRAIN_TIMEOUT and upstreams with 1000, waits for the pending
// accept loops to return, then stops the admin server.
func drain(srv *proxy.Server, admin *adminServer, cfg config.Config, log *zap.Logger, served <-chan error, pending int) error {
	log.Info("shutting down", zap.Duration("drain_timeout", cfg.DrainTimeout), zap.Int("sessions", srv.Sessions()))
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout+shutdownGrace)
	defer cancel()
	err := srv.Shutdown(ctx, cfg.DrainTimeout)
	for range pending {
		// Shutdown closed every listener, so each accept loop returns
		// (nil after a shutdown, or the error that stopped it first).
		err = errors.Join(err, <-served)
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
func proxyOptions(cfg config.Config, log *zap.Logger) (proxy.Options, error) {
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		return proxy.Options{}, err
	}
	up := upstream.Options{
		URL:       cfg.UpstreamURL.String(),
		Kind:      cfg.Kind(),
		SSEFormat: cfg.SSEFormat,
		Header:    cfg.Header(),
		TokenFile: cfg.UpstreamTokenFile,
		TLSConfig: tlsConfig,
		Proxy:     cfg.ProxyFunc(),

		Compression: cfg.UpstreamCompression,

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
		Rules:                 messageRules(cfg),
		Sequences:             sequencePolicy(cfg, up),
		Protocol:              cfg.Preset(),
		AllowedOrigins:        cfg.AllowedOrigins,
		AllowedHosts:          cfg.Listen.AllowedHosts(),
		TCPBinary:             cfg.TCPBinary,
		TCPNewline:            cfg.TCPNewline,
		ForwardPath:           cfg.ForwardPath,
		SSELinger:             cfg.SSELinger,
	}, nil
}

// messageRules maps the TETHER_*_MATCH and *_PATH variables onto the rules
// protocol: those that restore the app on new connections, those that read
// the upstream's liveness, and where upstream messages carry their sequence
// numbers.
func messageRules(cfg config.Config) protocol.Rules {
	return protocol.Rules{
		AuthMatch:            cfg.AuthMatch,
		ConfirmMatch:         cfg.ConfirmMatch,
		HeartbeatReplyMatch:  cfg.HeartbeatReplyMatch,
		AuthOKMatch:          cfg.AuthOKMatch,
		SubscribeMatch:       cfg.SubscribeMatch,
		UnsubscribeMatch:     cfg.UnsubscribeMatch,
		SubscriptionKey:      cfg.SubscriptionKey,
		ReplyIDPath:          cfg.ReplyIDPath,
		HideOnReconnectMatch: cfg.HideOnReconnectMatch,
		AckIDPath:            cfg.AckIDPath,
		AckMatch:             cfg.AckMatch,
		SubscriptionEndMatch: cfg.SubscriptionEndMatch,
		AppPingMatch:         cfg.AppPingMatch,
		AppPongMessage:       []byte(cfg.AppPongMessage),
		AppKeepaliveMessage:  []byte(cfg.AppKeepaliveMessage),
		AppKeepaliveInterval: cfg.AppKeepaliveInterval,
		Framing:              cfg.Framing,
		SubscribeReplay:      cfg.SubscribeReplay,
		SessionMatch:         cfg.SessionMatch,
		SessionPath:          cfg.SessionPath,
		SeqPath:              cfg.SeqPath,
		StreamPath:           cfg.StreamPath,
		ResyncMatch:          cfg.ResyncMatch,
		ResyncSeqPath:        cfg.ResyncSeqPath,
		EpochPath:            cfg.EpochPath,
		SeqFirstPath:         cfg.SeqFirstPath,
		SeqPrevPath:          cfg.SeqPrevPath,
	}
}

// sequencePolicy maps the sequence variables onto the proxy's sequencing
// policy. With TETHER_GAPFILL_URL or TETHER_RESYNC_URL set, the one HTTP
// client all sessions share fetches
// with the upstream's credentials: its static headers, the token file
// (re-read on every request) and its TLS settings; one request may take the
// whole gap timeout.
func sequencePolicy(cfg config.Config, up upstream.Options) proxy.Sequences {
	s := proxy.Sequences{
		ResumeMessage: cfg.ResumeMessage,
		SeqModel:      cfg.SeqModel,
		SeqScope:      cfg.SeqScope,
		GapFillURL:    cfg.GapFillURL,
		ResyncURL:     cfg.ResyncURL,
		GapTimeout:    cfg.GapTimeout,
		GapPolicy:     cfg.GapPolicy,
		GapNotice:     cfg.GapNotice,
		HoldMaxBytes:  int(cfg.HoldMaxBytes),
	}
	if cfg.GapFillURL.IsSet() || cfg.ResyncURL.IsSet() {
		s.GapFill = gapfill.NewClient(gapfill.Options{
			Header:    up.Header.Clone(),
			TokenFile: up.TokenFile,
			TLS:       up.TLSConfig,
			Proxy:     up.Proxy,
			Timeout:   cfg.GapTimeout,
		})
	}
	return s
}
