package protocol

import (
	"github.com/tetherproxy/tether/internal/template"
)

// templateReplay is the rules' Capabilities.Replay with
// TETHER_SUBSCRIBE_REPLAY: a keyed subscribe whose stream (the stream
// named as its key) has a last number delivered to the app is sent as the
// template renders it, so the server resumes it from there (a Centrifugo
// subscribe with recover and offset). Any other entry, and one whose stream
// has no number yet, is sent as the app sent it: there is nothing to resume
// from.
type templateReplay struct {
	t template.SubscribeReplay
}

func (r *ruleSet) replayer() Replayer {
	if !r.SubscribeReplay.IsSet() {
		return nil
	}
	return templateReplay{r.SubscribeReplay}
}

func (r templateReplay) Replay(e Entry, cur Current) ([]byte, error) {
	if e.Op != AppSubscribe || !e.Keyed {
		return e.Message, nil
	}
	last, ok := cur.LastSeq(e.Key)
	if !ok {
		return e.Message, nil
	}
	return r.t.Render(template.Replay{Stream: e.Key, LastSeq: last, Epoch: cur.Epoch(e.Key), Message: string(e.Message)})
}
