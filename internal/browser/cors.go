package browser

import "net/http"

// An EventSource request from a web page is subject to CORS, unlike a
// WebSocket handshake: a page on another origin reads the stream only if
// the response names its origin in Access-Control-Allow-Origin. An allowed
// Origin (Guard.CheckOrigin) is therefore echoed there, with
// Allow-Credentials for pages that set withCredentials; a request without
// Origin gets no CORS header. A CORS preflight (OPTIONS) from an allowed
// Origin is answered too: a browser sends one before a fetch-based
// EventSource polyfill's request (Last-Event-ID is not a CORS-safelisted
// header), and Chrome before any request a public site makes to a loopback
// address (Private Network Access).

// IsPreflight reports a CORS preflight for a GET (Fetch standard §3.2.2).
func IsPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") == http.MethodGet
}

// Preflight answers a preflight from a page of an allowed origin (checked
// already): it may make its GET with the headers it asked for.
func Preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	AllowOrigin(h, r.Header.Get("Origin"))
	h.Set("Access-Control-Allow-Methods", http.MethodGet)
	if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
		h.Set("Access-Control-Allow-Headers", asked)
	}
	if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	h.Set("Access-Control-Max-Age", "600")
	h.Add("Vary", "Access-Control-Request-Headers")
	w.WriteHeader(http.StatusNoContent)
}

// AllowOrigin lets a page of an allowed origin (checked already) read the
// response.
func AllowOrigin(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true")
	h.Add("Vary", "Origin")
}
