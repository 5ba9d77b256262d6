package protocol

import "slices"

// replyWaits matches upstream replies to the requests sent on the current
// connection by their reply id (App.ReplyID, Upstream.ReplyID). Replies are
// assumed to come in request order for requests sharing an id, which is
// what lets an app that reuses one id for everything still have only the
// replies to tether's own replays hidden. It is bounded: past max, requests
// are not followed and their replies reach the app, the safe side.
type replyWaits struct {
	byID map[string][]waiter
	n    int
	max  int
}

// waiter is one request waiting for its reply.
type waiter struct {
	own    bool   // tether re-sent it and the app has already seen its reply: hide
	ref    uint64 // the login record or log entry, marked answered when the app sees the reply
	replay bool   // a replayed subscription whose reply a restore awaits (ReplyWait)
}

func (w *replyWaits) reset() {
	clear(w.byID)
	w.n = 0
}

// add looks for the reply to a request with id, and reports whether it
// does (not without an id, nor past max).
func (w *replyWaits) add(id string, wt waiter) bool {
	if id == "" || w.n >= w.max {
		return false
	}
	if w.byID == nil {
		w.byID = map[string][]waiter{}
	}
	w.byID[id] = append(w.byID[id], wt)
	w.n++
	return true
}

// take removes and returns the oldest request waiting for a reply with id.
func (w *replyWaits) take(id string) (waiter, bool) {
	q := w.byID[id]
	if len(q) == 0 {
		return waiter{}, false
	}
	wt := q[0]
	if len(q) == 1 {
		delete(w.byID, id)
	} else {
		w.byID[id] = slices.Delete(q, 0, 1)
	}
	w.n--
	return wt, true
}
