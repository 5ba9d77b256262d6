package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"
)

// Settings that could never take effect, or contradict each other, are
// refused with a message naming what to add or drop.
func TestSequenceConfigValidation(t *testing.T) {
	const (
		resume = `{"t":"resume","after":{{.LastSeq}}}`
		url    = "http://127.0.0.1:1/c?from={{.From}}"
		notice = `{"gap":{{.From}}}`
		snap   = "http://127.0.0.1:1/api/v3/depth?symbol={{query .Stream}}"
	)
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TETHER_SESSION_MATCH": `{"t":"welcome"}`, "TETHER_RESUME_MESSAGE": resume, "TETHER_SEQ_PATH": "seq"},
			"TETHER_SESSION_MATCH: needs TETHER_SESSION_PATH"},
		{map[string]string{"TETHER_SESSION_PATH": "session"}, "TETHER_SESSION_PATH: needs TETHER_SESSION_MATCH"},
		{map[string]string{"TETHER_SESSION_MATCH": `{"t":"welcome"}`, "TETHER_SESSION_PATH": "session"},
			"TETHER_SESSION_MATCH: needs TETHER_RESUME_MESSAGE or TETHER_GAPFILL_URL or TETHER_RESYNC_URL"},
		{map[string]string{"TETHER_RESUME_MESSAGE": resume}, "TETHER_RESUME_MESSAGE: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_STREAM_PATH": "channel"}, "TETHER_STREAM_PATH: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_RESYNC_MATCH": `{"t":"snapshot"}`, "TETHER_SEQ_PATH": "seq"},
			"TETHER_RESYNC_MATCH: needs TETHER_RESYNC_SEQ_PATH"},
		{map[string]string{"TETHER_RESYNC_MATCH": `{"t":"snapshot"}`, "TETHER_RESYNC_SEQ_PATH": "seq"},
			"TETHER_RESYNC_MATCH: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_RESYNC_SEQ_PATH": "seq", "TETHER_SEQ_PATH": "seq"},
			"TETHER_RESYNC_SEQ_PATH: needs TETHER_RESYNC_MATCH or TETHER_RESYNC_URL"},
		{map[string]string{"TETHER_RESYNC_URL": snap, "TETHER_SEQ_PATH": "seq"},
			"TETHER_RESYNC_URL: needs TETHER_RESYNC_SEQ_PATH"},
		{map[string]string{"TETHER_RESYNC_URL": snap, "TETHER_RESYNC_SEQ_PATH": "lastUpdateId"},
			"TETHER_RESYNC_URL: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_RESYNC_URL": "http://h/depth?from={{.From}}", "TETHER_SEQ_PATH": "u", "TETHER_RESYNC_SEQ_PATH": "lastUpdateId"},
			"can't evaluate field From in type template.Snapshot (the fields are .Stream .Session)"},
		{map[string]string{"TETHER_RESYNC_URL": snap, "TETHER_SEQ_PATH": "u", "TETHER_RESYNC_SEQ_PATH": "lastUpdateId", "TETHER_SEQ_MODEL": "increasing"},
			"TETHER_RESYNC_URL: never fetched with TETHER_SEQ_MODEL=increasing, which sees no gaps"},
		{map[string]string{"TETHER_RESYNC_URL": snap, "TETHER_SEQ_PATH": "u", "TETHER_RESYNC_SEQ_PATH": "lastUpdateId", "TETHER_SEQ_SCOPE": "connection"},
			"TETHER_RESYNC_URL: a snapshot's number cannot continue numbers that restart on each connection (TETHER_SEQ_SCOPE=connection)"},
		{map[string]string{"TETHER_GAPFILL_URL": url}, "TETHER_GAPFILL_URL: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_EPOCH_PATH": "epoch"}, "TETHER_EPOCH_PATH: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_SEQ_MODEL": "chain", "TETHER_SEQ_PREV_PATH": "p"}, "TETHER_SEQ_MODEL: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_SEQ_MODEL": "range", "TETHER_SEQ_PATH": "u"}, "TETHER_SEQ_FIRST_PATH: required when TETHER_SEQ_MODEL=range"},
		{map[string]string{"TETHER_SEQ_MODEL": "chain", "TETHER_SEQ_PATH": "u"}, "TETHER_SEQ_PREV_PATH: required when TETHER_SEQ_MODEL=chain"},
		{map[string]string{"TETHER_SEQ_PATH": "u", "TETHER_SEQ_FIRST_PATH": "U"}, `TETHER_SEQ_FIRST_PATH: only read with TETHER_SEQ_MODEL=range, got "next"`},
		{map[string]string{"TETHER_SEQ_PATH": "u", "TETHER_SEQ_MODEL": "range", "TETHER_SEQ_FIRST_PATH": "U", "TETHER_SEQ_PREV_PATH": "pu"},
			`TETHER_SEQ_PREV_PATH: only read with TETHER_SEQ_MODEL=chain, got "range"`},
		{map[string]string{"TETHER_SEQ_MODEL": "ranges"}, `TETHER_SEQ_MODEL: unknown sequence model "ranges"`},
		{map[string]string{"TETHER_SEQ_SCOPE": "connection"}, "TETHER_SEQ_SCOPE: needs TETHER_SEQ_PATH"},
		{map[string]string{"TETHER_SEQ_SCOPE": "connection", "TETHER_SEQ_PATH": "seq", "TETHER_GAPFILL_URL": url},
			"TETHER_GAPFILL_URL: cannot ask for numbers of an earlier connection under TETHER_SEQ_SCOPE=connection"},
		{map[string]string{"TETHER_SEQ_SCOPE": "socket"}, `TETHER_SEQ_SCOPE: unknown sequence scope "socket"`},
		{map[string]string{"TETHER_SEQ_PATH": "seq", "TETHER_GAP_POLICY": "notify"},
			"TETHER_GAP_NOTICE: required when TETHER_GAP_POLICY=notify"},
		{map[string]string{"TETHER_SEQ_PATH": "seq", "TETHER_GAP_NOTICE": notice},
			`TETHER_GAP_NOTICE: only sent with TETHER_GAP_POLICY=notify, got "close"`},
		{map[string]string{"TETHER_GAP_POLICY": "drop"}, `TETHER_GAP_POLICY: unknown gap policy "drop"`},
		{map[string]string{"TETHER_GAP_TIMEOUT": "0s"}, `TETHER_GAP_TIMEOUT: must be > 0, got "0s"`},
		{map[string]string{"TETHER_HOLD_MAX_BYTES": "0"}, `TETHER_HOLD_MAX_BYTES: must be > 0`},
		{map[string]string{"TETHER_RESUME_MESSAGE": `{"after":{{.LastSeqq}}}`, "TETHER_SEQ_PATH": "seq"},
			"TETHER_RESUME_MESSAGE: "},
		{map[string]string{"TETHER_GAPFILL_URL": "wss://h/{{.From}}", "TETHER_SEQ_PATH": "seq"},
			`TETHER_GAPFILL_URL: rendered URL has scheme "wss": want http or https`},
		{map[string]string{"TETHER_SEQ_PATH": "a..b"}, "TETHER_SEQ_PATH: path has an empty component"},
	}
	for _, tc := range tests {
		lines := loadErrLines(t, configtest.WithURL(tc.env))
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, tc.want) }) {
			t.Errorf("env %v: problems %q, want one containing %q", tc.env, lines, tc.want)
		}
	}
}
