package protocol

import "github.com/tetherproxy/tether/buffer"

// Requests folded away: a keyed unsubscribe the app sends while no
// connection is live cancels its subscribe in the replay log and is not
// kept, so neither reaches the server, and a reply the app waits for (the
// unsubscribe's, or that of a subscribe it cancelled before the app saw
// its answer) would never come. Where one is awaited (a reply id), the
// pair is sent once on the next connection, before the replay log, so the
// server answers it: the subscribe, then the unsubscribe. The reply to a
// subscribe whose answer the app has already seen is hidden (tether
// re-sent it only so that the unsubscribe has something to end); the
// others are the app's.

// folded is one request sent on the app's behalf on the next connection.
type folded struct {
	msg     buffer.Message
	replyID string
	own     bool // the app has seen its reply: the reply is hidden
}

// Fold records the requests a, an app message arriving while no connection
// is live or being restored, folds away when it is a keyed unsubscribe.
// Called just before Remember applies it to the log. It reports false
// when the requests awaited would pass the replay log's message cap, which
// bounds them too: the session treats that as a full replay log.
func (st *State) Fold(a App, m buffer.Message) bool {
	if a.Kind != AppUnsubscribe || !a.Keyed {
		return true
	}
	sub, cancels := st.log.Subscribed(a.Key)
	awaited := a.ReplyID != "" || cancels && sub.ReplyID != "" && !sub.Answered
	if !awaited {
		return true
	}
	if len(st.folded)+2 > st.maxFolded {
		return false
	}
	if cancels {
		st.folded = append(st.folded, folded{msg: sub.Message, replyID: sub.ReplyID, own: sub.Answered})
	}
	st.folded = append(st.folded, folded{msg: m, replyID: a.ReplyID})
	return true
}

// beginFolded returns the folded requests for a restore's snapshot and
// looks for their replies, and how many of those a restore awaits
// (Capabilities.AwaitReplies); they stay until FoldedSent.
func (st *State) beginFolded() ([]buffer.Message, int) {
	if len(st.folded) == 0 {
		return nil, 0
	}
	out := make([]buffer.Message, len(st.folded))
	awaited := 0
	for i, f := range st.folded {
		out[i] = f.msg
		if st.waits.add(f.replyID, waiter{own: f.own, replay: st.awaitReplies}) && st.awaitReplies {
			awaited++
		}
	}
	return out, awaited
}

// FoldedSent records that a restore sent the first n folded requests of its
// snapshot: they are not sent again.
func (st *State) FoldedSent(n int) {
	st.folded = st.folded[min(n, len(st.folded)):]
}
