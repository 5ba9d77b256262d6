// Package sequence owns the sequencing of one session's upstream messages
// (docs/design.md "Sequences and gap filling"): a Sequencer per session
// drops duplicates, holds the successors of a gap (buffer.Tracker) until
// the live stream, a resumed replay or a catch-up over HTTP fills it,
// times each gap (TETHER_GAP_TIMEOUT) and applies TETHER_GAP_POLICY to one
// not filled in time (close, skip, or notify with the rendered
// TETHER_GAP_NOTICE), renders TETHER_RESUME_MESSAGE for each new connection
// and remembers which streams it asked for on which connection, and logs
// and counts all of it. A message follows its stream's last number by the
// feed's model (TETHER_SEQ_MODEL: buffer.Model); numbers count per stream
// or per connection (TETHER_SEQ_SCOPE); a stream whose numbering started
// over (a new TETHER_EPOCH_PATH value, numbers back on a new connection)
// is reset and given to the policy (reset.go), as is at once a gap across
// a reconnect that nothing can fill. With a SnapshotFunc
// (TETHER_RESYNC_URL), a gap that cannot be filled resets its stream to a
// snapshot fetched over HTTP instead, and only a failed snapshot goes to
// the policy (snapshot.go).
//
// It reads no message content: the session's classification gives it each
// message's Fields. What it needs from its session comes through Options:
// an App that takes what it releases, a Classify func for what a catch-up
// fetched, a logger and Metrics. Time comes from a Clock (System in
// production, a virtual clock in tests), catch-ups from a FetchFunc
// (HTTPFetch with internal/gapfill in production) and snapshots from a
// SnapshotFunc (HTTPSnapshot). A Tally (tally.go) is the Metrics of one
// session: it counts that session's duplicates, gaps and recoveries for
// its status and passes each on; its counts are atomic.
//
// # Concurrency
//
// A Sequencer owns its lock, its delivery turn, its gap timers and its
// catch-up and snapshot goroutines. Offer and Flush are the upstream reader's: Offer
// takes the delivery turn and keeps it across a burst of messages, and
// Flush hands the batch to the App and gives the turn up; the reader calls
// Flush before any read that may wait. A gap timer and a catch-up take the
// same turn, so what the tracker releases reaches the App in the order the
// tracker produced it, whoever released it, and each waits for at most one
// burst of the reader. ResumeMessages, Lost and Stop may be called from any
// goroutine; the caller must not hold a lock the App or Classify takes.
//
// App methods and Classify are called with the turn held and the
// Sequencer's lock released, so they may block (the app's back-pressure)
// and call into the session; Metrics and the logger are called with no
// lock held. Stop stops the timers, cancels the catch-ups and waits for
// the callbacks and catch-ups under way: after it returns, the Sequencer
// starts no goroutine and calls nothing.
package sequence
