package main

import (
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/internal/status"
	"github.com/tetherproxy/tether/proxy"
)

// statusSource builds the document at the moment of a request.
type statusSource func() status.Doc

// newStatusSource reads srv's sessions for the admin server.
func newStatusSource(srv *proxy.Server, cfg config.Config) statusSource {
	kind := cfg.Kind().String()
	return func() status.Doc {
		return status.Build(srv.Status(), kind, version, time.Now())
	}
}

// securityHeaders keep the pages inert: no script may run (the page has
// none), nothing is loaded from elsewhere, no other site may frame them, and
// no cache keeps them.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// statusJSON serves the document at /status.
func statusJSON(src statusSource, log *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		body, err := json.MarshalIndent(src(), "", "  ")
		if err != nil {
			log.Error("status document not encoded", zap.Error(err))
			writePlain(w, http.StatusInternalServerError, "status document not encoded")
			return
		}
		securityHeaders(w)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(body, '\n'))
	})
}

// statusPage serves the HTML status page at /: the document of /status as
// one row per session, reloaded every status.Refresh by a meta refresh (no
// script, no asset from anywhere: securityHeaders forbids both).
func statusPage(src statusSource, log *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		page, err := status.HTML(src())
		if err != nil {
			log.Error("status page not rendered", zap.Error(err))
			writePlain(w, http.StatusInternalServerError, "status page not rendered")
			return
		}
		securityHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
}
