// Package interop holds no code, only tests: tether, built from ./cmd/tether
// and run as a user runs it (TETHER_* variables, its JSON log), between
// WebSocket peers that the project did not write:
//
//   - Node.js with the ws package (npm), the most used JavaScript
//     implementation, as app and as upstream;
//   - Python with the websockets library (Debian's python3-websockets), as app
//     and as upstream;
//   - each with the other across tether (Python app, Node upstream and the
//     reverse).
//
// The peers are small scripts in testdata/ that print one JSON object a line
// for every event they see (open, message, close with code and reason, pong)
// and obey one JSON command a line on stdin (send, ping, feed, close). The
// tests check what the README promises a new user: text stays text and binary
// stays binary, a 1 MiB message and a fragmented one arrive whole, the
// upstream's subprotocol choice reaches the app, pings from either side are
// answered, a numbered feed survives the upstream process being SIGKILLed and
// restarted on the same port without the app's socket closing, a message sent
// while the upstream is away reaches the restarted one, an upstream close 1008
// reaches the app with its code and reason, an app's close 1000 completes and
// closes the upstream with 1000, and a browser-like handshake with an Origin
// header is accepted when TETHER_ALLOWED_ORIGINS lists it and refused with 403,
// before any upstream dial, when it does not.
//
// The graphql-ws preset (TETHER_PROTOCOL=graphql-ws) is tested the same
// way, with the real graphql-ws 6 server and client from npm (graphql 16):
// graphqlws_test.go, scripts graphqlws_server.mjs and graphqlws_app.mjs.
//
// Finding the peers: node must be on PATH and the ws package (8.x) in
// testdata/node_modules, which git ignores; Python is
// $TETHER_INTEROP_PYTHON, else python3 on PATH, else /usr/bin/python3, the
// first that imports websockets. .ci/run installs both. A missing peer skips
// its tests with the install command, unless the CI variable is set: then the
// test fails, because CI must not pass without having talked to the peers.
//
// Concurrency: every test starts its processes in their own process group and
// kills the group in t.Cleanup; one goroutine per process reads its output and
// ends, with the process, before the test does. The peer scripts also exit
// when their stdin closes, and on Linux every child gets SIGKILL when the test
// binary dies, so a timed-out test leaves no process behind.
package interop
