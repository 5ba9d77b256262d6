// Package proxydial reaches an upstream through an HTTP proxy: the CONNECT
// tunnel of a WebSocket upstream (RFC 9110 §9.3.6, over TLS to an https://
// proxy, with Basic credentials from the proxy URL), and the typing of
// net/http's proxy failures for an SSE upstream, both as an *Error that
// names the proxy by host:port and never by its credentials. Which proxy
// applies to which upstream URL is package upstream's to decide
// (Options.Proxy).
//
// Concurrency: Tunnel's dial function and the other functions hold no
// state and are safe from any goroutine; a dial is bounded by its context.
package proxydial
