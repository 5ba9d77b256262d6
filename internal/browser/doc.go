// Package browser keeps web pages out of a loopback listener
// (docs/design.md "Local listener and security"): a Guard checks the Origin
// and Host headers of an app's handshake against the allowed origins and
// loopback names, and NormalizeOrigin puts an origin in the form they are
// compared in; the CORS answers of an sse:// listener (cors.go) let pages of
// the allowed origins read its event stream. No goroutines, no I/O; a Guard
// is read-only once built.
package browser
