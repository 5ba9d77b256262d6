// Package ssetest is a real Server-Sent Events upstream for tests: a
// net/http server on 127.0.0.1:0 that streams text/event-stream responses,
// flushing after every event, and that a test scripts while clients are
// connected.
//
// It writes the wire format itself and imports no tether package, so a bug
// in tether's own parser or encoder cannot hide by being shared with the
// peer that tests it. Its own tests read it with the sse package's Reader
// over real HTTP requests.
//
// What a test can do:
//
//   - publish events ([Server.Publish]): ids are numbers rising from 1,
//     data may span lines, events may be named or carry no id line;
//     comments ([Server.Comment], [Options.CommentEvery], and idle
//     keep-alives every [Options.Heartbeat]), "retry" fields
//     ([Server.Retry], [Options.Retry]) and arbitrary bytes ([Server.Raw]);
//   - resume: the last [Options.History] events are kept, and a request with
//     a numeric Last-Event-ID header is answered with the kept events after
//     it before the live ones. When the history no longer holds the events
//     right after that id, the stream starts at the oldest kept event and
//     [Request.GapFrom] and [Request.GapTo] name the ids the client lost;
//   - break connections: end every response cleanly ([Server.EndAll]),
//     close the TCP connections mid-stream ([Server.DropAll]) or reset them
//     ([Server.ResetAll]), or go silent while keeping the sockets open
//     ([Server.StallAll]);
//   - refuse requests: the next k requests get a given status, headers and
//     body (503 with Retry-After, 204, 401, a 200 with the wrong type), or
//     a 200 that never sends a byte of body ([Server.RespondNext]);
//   - observe: every request's arrival time, headers (Last-Event-ID,
//     Authorization) and outcome ([Server.Requests]), and wait without
//     polling until a number of requests or live streams is reached
//     ([Server.WaitRequests], [Server.WaitStreams]).
//
// # Concurrency contract
//
// Every exported method of [Server] is safe for concurrent use. Each
// response is written by its own net/http handler goroutine; publishing
// only appends to each stream's queue and wakes that goroutine, so a client
// that stops reading never blocks the test. [Server.Close] ends every
// response, closes every connection and returns only after all handler
// goroutines have exited, so goleak-checked tests stay clean. A stream's
// queue is not bounded: this is a test peer, not a model for production.
package ssetest
