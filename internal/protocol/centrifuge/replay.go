package centrifuge

import (
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/protocol"
)

// replayer rewrites a replayed subscribe to recover the channel from where
// the app is (Capabilities.Replay): recover true, the offset of the last
// publication the app got (or the offset its subscribe reply gave, when
// none came since), the epoch of the last subscribe reply. A subscribe
// whose reply gave no epoch (a channel without recovery, or one replayed
// before its reply came) is replayed as the app sent it.
type replayer struct{}

func (replayer) Replay(e protocol.Entry, cur protocol.Current) ([]byte, error) {
	if e.Op != protocol.AppSubscribe {
		return e.Message, nil
	}
	r := gjson.GetManyBytes(e.Message, "subscribe.epoch", "subscribe.offset")
	if r[0].Str == "" {
		return e.Message, nil
	}
	offset := r[1].Uint()
	if last, ok := cur.LastSeq(e.Key); ok && last > 0 && uint64(last) > offset {
		offset = uint64(last)
	}
	return setSubscribe(e.Message, map[string]any{"recover": true, "epoch": r[0].Str, "offset": offset})
}

// setSubscribe returns the command msg with the fields of its subscribe
// object set to set's values, the rest kept as it was.
func setSubscribe(msg []byte, set map[string]any) ([]byte, error) {
	var cmd map[string]json.RawMessage
	if err := json.Unmarshal(msg, &cmd); err != nil {
		return nil, fmt.Errorf("subscribe command: %w", err)
	}
	var sub map[string]json.RawMessage
	if err := json.Unmarshal(cmd["subscribe"], &sub); err != nil {
		return nil, fmt.Errorf("subscribe command: %w", err)
	}
	for k, v := range set {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		sub[k] = raw
	}
	raw, err := json.Marshal(sub)
	if err != nil {
		return nil, err
	}
	cmd["subscribe"] = raw
	return json.Marshal(cmd)
}
