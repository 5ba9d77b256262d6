// Package buffer holds tether's bounded, deterministic data structures: the
// outbox (a FIFO of app messages with count and byte caps and an overflow
// policy), and the other per-session stores listed in docs/design.md (replay log,
// sequence tracker, hold buffer).
//
// The outbox and the messages waiting for an acknowledgement (Pending) draw
// on one Budget, because docs/design.md counts both against the outbox caps;
// a Budget may also count on the session's account of tether's one memory
// budget (Budget.SetMeter, TETHER_MEMORY_LIMIT), whose refusal the stores
// treat as their caps' own. The replay log (ReplayLog) has caps of its own,
// and RecentIDs remembers a bounded window of acknowledged ids.
//
// The package does no I/O, starts no goroutines and logs nothing: every
// decision a caller must report (a dropped message, a full outbox) is returned
// to it, so the caller can log and count it where it is handled. Keeping the
// types pure is what lets them be table-tested and fuzzed without sockets.
//
// Concurrency: no type in this package is safe for concurrent use. Each one
// belongs to a single session, which serializes access with its own lock;
// adding locks here would only hide that ownership.
package buffer
