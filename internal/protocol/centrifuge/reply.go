package centrifuge

import (
	"encoding/json"

	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/protocol"
)

// Insufficient is the unsubscribe push the app gets for a channel whose
// replay could not recover: a Centrifuge server's own "insufficient state"
// (code 2500, of the resubscribe codes 2500–2999), after which the client
// library subscribes again from its own position.
const (
	InsufficientCode   = 2500
	InsufficientReason = "insufficient state"
)

// OwnID is the id of the commands tether sends on its own behalf (the
// unsubscribe before an Insufficient push): the largest id of the
// protocol (uint32), which a client library that numbers its commands
// from 1 never reaches. The reply reaches the app, whose client library
// ignores a reply to an id it did not use.
const OwnID = 1<<32 - 1

// reply reads a reply to a logged subscribe (Capabilities.Reply). Every
// reply that gives the channel's epoch records it, with its offset, in the
// logged subscribe for the next replay. A reply to the app's own subscribe
// resets the channel's stream to the reply's offset (the app starts there,
// or recovered up to there itself). A reply to tether's replay that
// recovered delivers the recovered publications as pushes; one that did
// not recover a recoverable channel, or an error, goes to the app as the
// protocol's own unsubscribe with code 2500 (Insufficient).
//
// A reply that is not valid JSON is no reply: gjson reads broken JSON
// leniently, and the publications of one would reach the app as pushes
// that are not JSON either.
func reply(data []byte, e protocol.Entry, own bool) protocol.Answer {
	if e.Op != protocol.AppSubscribe || !e.Keyed || !gjson.ValidBytes(data) {
		return protocol.Answer{}
	}
	r := gjson.GetManyBytes(data, "subscribe", "error")
	switch {
	case r[1].Exists():
		if own {
			return protocol.Answer{Messages: [][]byte{insufficient(e.Key)}}
		}
		return protocol.Answer{}
	case !r[0].IsObject():
		return protocol.Answer{}
	}
	s := gjson.GetManyBytes([]byte(r[0].Raw), "epoch", "offset", "recovered", "was_recovering", "publications")
	epoch, offset := s[0].Str, s[1].Int()
	var a protocol.Answer
	if epoch != "" {
		a.Log, _ = setSubscribe(e.Message, map[string]any{"epoch": epoch, "offset": uint64(offset)})
		a.Seq = protocol.Fields{Stream: e.Key, Resync: true, ResyncSeq: offset}
	}
	if !own {
		return a
	}
	switch {
	case s[2].Bool():
		a.Seq = protocol.Fields{} // the publications carry the stream on
		// ForEach calls back once with a value that is not an array: only
		// an array holds publications.
		if s[4].IsArray() {
			s[4].ForEach(func(_, pub gjson.Result) bool {
				a.Messages = append(a.Messages, push(e.Key, "pub", pub.Raw))
				return true
			})
		}
	case epoch != "":
		// The server could not recover (a new epoch, history too short),
		// or was not asked to (the replay knew no epoch yet): the stream
		// restarts at the reply's offset, and the app, which may have
		// missed publications, learns it as from a server.
		a.Messages = [][]byte{insufficient(e.Key)}
		a.Upstream = [][]byte{unsubscribe(e.Key)}
	}
	return a
}

// push is the push of kind for channel, body being its JSON.
func push(channel, kind, body string) []byte {
	ch, _ := json.Marshal(channel)
	out := make([]byte, 0, 32+len(ch)+len(kind)+len(body))
	out = append(out, `{"push":{"channel":`...)
	out = append(out, ch...)
	out = append(out, `,"`...)
	out = append(out, kind...)
	out = append(out, `":`...)
	out = append(out, body...)
	return append(out, `}}`...)
}

func insufficient(channel string) []byte {
	reason, _ := json.Marshal(InsufficientReason)
	return push(channel, "unsubscribe", `{"code":2500,"reason":`+string(reason)+`}`)
}

// unsubscribe is tether's own unsubscribe command for channel.
func unsubscribe(channel string) []byte {
	ch, _ := json.Marshal(channel)
	return []byte(`{"id":4294967295,"unsubscribe":{"channel":` + string(ch) + `}}`)
}
