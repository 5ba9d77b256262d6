package template

import (
	"github.com/tidwall/gjson"
)

// Replay is the data of TETHER_SUBSCRIBE_REPLAY, rendered for each logged
// subscription a restore replays whose stream has a known last number.
type Replay struct {
	Stream  string // the subscription's key (TETHER_SUBSCRIPTION_KEY), which names its stream
	LastSeq int64  // the last number of Stream delivered to the app
	Epoch   string // the numbering LastSeq belongs to (TETHER_EPOCH_PATH); "" when none
	Message string // the subscribe message as the app sent it; read parts of it with get
}

// sampleReplay validates TETHER_SUBSCRIBE_REPLAY at parse time: a message
// with the usual fields, so a template that reads one with get renders it.
var sampleReplay = Replay{Stream: "stream", LastSeq: 41, Epoch: "epoch", Message: `{"id":1,"op":"subscribe","channel":"stream"}`}

// SubscribeReplay is TETHER_SUBSCRIBE_REPLAY. The zero value is unset.
type SubscribeReplay struct{ t *Template }

// UnmarshalText parses and validates the template; empty text leaves it
// unset.
func (r *SubscribeReplay) UnmarshalText(text []byte) error {
	t, err := parseVar("subscribe replay", text, sampleReplay)
	r.t = t
	return err
}

// IsSet reports whether a template was configured.
func (r SubscribeReplay) IsSet() bool { return r.t != nil }

// Render renders the replayed subscribe for d. It panics when the
// template is unset.
func (r SubscribeReplay) Render(d Replay) ([]byte, error) { return r.t.Execute(d) }

// String returns the template's source text, "" when unset.
func (r SubscribeReplay) String() string { return sourceOf(r.t) }

// getValue is the get function: the JSON text of the value at the gjson
// path in message, as the message holds it ("null" when there is none), so
// that it can be put into the rendered message as it is.
func getValue(message, path string) string {
	v := gjson.Get(message, path)
	if !v.Exists() {
		return "null"
	}
	return v.Raw
}
