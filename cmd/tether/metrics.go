package main

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/internal/metrics"
	"github.com/tetherproxy/tether/proxy"
)

// newMetrics creates the registry /metrics serves: tether's collectors and the
// Go runtime and process collectors. Each call makes a new registry, so the
// demo and tests can run several proxies in one process.
func newMetrics() (*prometheus.Registry, *metrics.Metrics, error) {
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterRuntime(reg); err != nil {
		return nil, nil, fmt.Errorf("register runtime metrics: %w", err)
	}
	m, err := metrics.New(reg, version)
	if err != nil {
		return nil, nil, err
	}
	return reg, m, nil
}

// instrument plugs the collectors into the proxy's options and, through them,
// into every session's upstream client. The configured close-code classes
// name application close codes in tether_upstream_disconnects_total{code}.
func instrument(opts *proxy.Options, cfg config.Config, m *metrics.Metrics) {
	opts.Metrics = m
	opts.Upstream.Observer = metrics.UpstreamObserver{
		Metrics:   m,
		Permanent: cfg.PermanentCodes.Contains,
		Reauth:    cfg.ReauthCodes.Contains,
	}
}

// metricsHandler serves reg in the Prometheus exposition formats. A collector
// error is logged and the rest of the page is still served: a scrape that
// fails entirely would hide every other metric during an incident.
func metricsHandler(reg *prometheus.Registry, log *zap.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            zap.NewStdLog(log.Named("metrics").WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})
}
