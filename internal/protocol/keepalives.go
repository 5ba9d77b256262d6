package protocol

// maxUnanswered bounds the keepalives remembered per connection. A client
// library has one ping outstanding at a time; one that sends more without
// waiting for the answers gets at most this many answers when the
// connection is lost, which is as good to it as one per ping: any answer
// proves the socket alive.
const maxUnanswered = 16

// keepalives are the app keepalives sent on connection gen that the
// upstream has not answered yet, oldest first (Keepalive.Answer).
type keepalives struct {
	gen  uint64
	data [][]byte
}

// KeepaliveSent records that the app keepalive data (the State keeps its
// own copy) went out on connection gen: if gen is lost before the upstream
// answers it (Upstream.KeepaliveReply), Unanswered returns it.
func (st *State) KeepaliveSent(gen uint64, data []byte) {
	k := &st.pings
	if k.gen != gen {
		k.gen, k.data = gen, k.data[:0]
	}
	if len(k.data) == maxUnanswered {
		k.data = append(k.data[:0], k.data[1:]...)
	}
	k.data = append(k.data, append([]byte(nil), data...))
}

// answered takes the oldest keepalive of gen off the list: the upstream
// answers them in order.
func (k *keepalives) answered(gen uint64) {
	if k.gen == gen && len(k.data) > 0 {
		k.data = k.data[1:]
	}
}

// Unanswered returns the app keepalives sent on connection gen, now lost,
// that the upstream never answered, oldest first, and forgets them: the
// session answers each itself (Keepalive.Answer).
func (st *State) Unanswered(gen uint64) [][]byte {
	k := &st.pings
	if k.gen != gen || len(k.data) == 0 {
		return nil
	}
	out := k.data
	k.data = nil
	return out
}

// asked is whether connection gen pinged the app (Upstream.Ping) since the
// app's last answer.
type asked struct {
	gen    uint64
	pinged bool
}

// Asked reports whether connection gen pinged the app since the app's last
// keepalive, which is the answer to that ping: it takes the ping as
// answered (Keepalive.OnlyAsked). A ping of an earlier connection asks
// nothing of gen. A server answered twice for one ping would take the
// second answer for one it did not ask for too: one answer per ping.
func (st *State) Asked(gen uint64) bool {
	if st.asked.gen != gen || !st.asked.pinged {
		return false
	}
	st.asked.pinged = false
	return true
}
