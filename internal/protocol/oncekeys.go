package protocol

import "github.com/tetherproxy/tether/buffer"

// onceKeys is what hides the keyed messages classified Once (Upstream.
// OnceKeyed): the app sees the first for each subscription key, and after
// that, on each new connection, the one answering tether's own replay of
// that subscription is hidden. The answer to a subscription the app makes
// itself, a second one or the same again, reaches it: a global "seen once"
// hid the first acknowledgement of the app's second subscription, and the
// app waiting for it hung.
type onceKeys struct {
	seenKeys map[string]bool // keys the app has seen a Once message for
	gen      uint64          // the connection whose restore owes the answers
	owed     map[string]int  // answers owed to tether's replays on gen, by key
}

// begin records the replay of entries on connection gen: each subscription
// whose answer the app has seen owes one hidden answer. Keys no longer in
// the log are forgotten: a later subscription to one is the app's own.
func (o *onceKeys) begin(gen uint64, entries []buffer.ReplayEntry) {
	if len(o.seenKeys) == 0 {
		return
	}
	o.gen = gen
	clear(o.owed)
	seen := make(map[string]bool, len(o.seenKeys))
	for _, e := range entries {
		if e.Op != buffer.ReplaySubscribe || !e.Keyed || !o.seenKeys[e.Key] {
			continue
		}
		seen[e.Key] = true
		if o.owed == nil {
			o.owed = map[string]int{}
		}
		o.owed[e.Key]++
	}
	o.seenKeys = seen
}

// own reports whether a Once message for key on connection gen answers
// tether's own replay, and takes it off what is owed.
func (o *onceKeys) own(gen uint64, key string) bool {
	if gen != o.gen || o.owed[key] == 0 {
		return false
	}
	o.owed[key]--
	return true
}

// seen records that the app has seen a Once message for key.
func (o *onceKeys) seen(key string) {
	if o.seenKeys == nil {
		o.seenKeys = map[string]bool{}
	}
	o.seenKeys[key] = true
}
