// Package forwardpath joins an app's request target onto the upstream URL
// for TETHER_FORWARD_PATH: each WebSocket app's request path
// and query are joined onto the upstream URL, so one tether can serve apps
// that connect to ws://127.0.0.1:8080/prices?symbol=X and
// ws://127.0.0.1:8080/orders with the upstream's base URL in front.
//
// The join rules, in order:
//
//   - The request target must be a path (RFC 9112 §3.2.1 origin-form,
//     starting with one "/"). An absolute URI (ws://other/...), an
//     authority, "*" and a target starting with "//" (which URL parsers
//     read as another host) are refused.
//   - A fragment ("#...") is dropped: it never belongs in a request.
//   - Percent-encodings are kept as the app sent them: %2F stays %2F, so
//     an encoded slash is never turned into a path separator, and %41 is
//     not decoded to A. A "%" not followed by two hex digits is refused.
//     Bytes a URI cannot hold as they are (space, non-ASCII, "\", "|", ...)
//     are percent-encoded; control characters are refused.
//   - Dot segments ("." and "..", encoded as %2E too) are resolved within
//     the app's path (RFC 3986 §5.2.4). A ".." that would climb above the
//     app's root is refused rather than clamped: no client that means well
//     sends one, and a silent rewrite would hide the attempt. The same
//     holds when %2F and %5C (or "\") are read as separators, as some
//     servers do: "/..%2Fadmin" is refused too. The result can never leave
//     the upstream URL's base path.
//   - A dot segment with a path parameter ("..;", "..;x=1", ".;", "..%3B",
//     also between %2F or %5C) is refused: servers that strip ";…" from
//     each segment (Tomcat, Jetty, Spring) read "/feed/..;/admin" as
//     "/admin", after every check here. Other segments with parameters
//     ("a;v=1", "..c;") are names and pass as they are.
//   - The resolved path is appended to the base path with exactly one "/"
//     between them. The app's path "/" (what every client sends for a URL
//     without a path) leaves the base path as it is.
//   - The query is the base URL's query, then the app's, joined by "&",
//     each kept byte for byte: duplicate keys stay, in order. A server that
//     takes the first value of a key therefore sees the base URL's.
//   - The base URL's fragment is dropped too.
//
// A refused target is answered with HTTP 400 (package proxy) before
// anything else happens: the app is not admitted and the upstream is never
// dialled.
//
// Concurrency: Join and ParseBase are pure functions, safe from any
// goroutine.
package forwardpath
