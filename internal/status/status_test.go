package status

import (
	"bytes"
	"encoding/json"
	"html/template"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// now is the instant every test document is built at.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// twoSessions is a Server's status with a session waiting out its backoff
// after the upstream closed with 1012, and one whose handshake waits for
// the first dial; times are in another zone, as a Server's clock may be.
func twoSessions() proxy.Status {
	zone := time.FixedZone("CET", 3600)
	at := func(ago time.Duration) time.Time { return now.Add(-ago).In(zone) }
	closed := upstream.Event{At: at(90 * time.Second), Kind: upstream.EventLost, Reason: "close",
		CloseCode: 1012, CloseReason: "<restart>", Attempt: 1, Delay: 1500400 * time.Microsecond}
	refused := upstream.Event{At: at(3 * time.Second), Kind: upstream.EventDialFailed, Reason: "refused", Attempt: 3,
		Delay: 4 * time.Second}
	return proxy.Status{
		Draining: true, MaxSessions: 8,
		Memory: &proxy.MemoryStatus{Limit: 64 << 20, Share: 1 << 20, Used: 48 << 20, Paused: 2, Pauses: 5},
		Sessions: []proxy.SessionStatus{{
			ID: 1, Listener: proxy.ListenerWS, Started: at(2*time.Hour + 10*time.Minute), Upstream: "wss://feed.example/v1",
			Admitted: true,
			Connection: upstream.Status{
				State: upstream.StateWaiting, Gen: 4, Attempt: 3, Reconnects: 2,
				NextRetry: now.Add(2500 * time.Millisecond).In(zone), DownSince: at(95 * time.Second),
				LastClose: closed, LastFailure: refused,
				Recent: []upstream.Event{{At: at(3 * time.Minute), Kind: upstream.EventConnected, Attempt: 1}, closed, refused},
			},
			OutboxMessages: 3, OutboxBytes: 120, MemoryHeld: 4096, Duplicates: 7,
			Gaps: map[string]uint64{"skipped": 1, "filled": 2}, Recoveries: map[string]uint64{"resume": 2},
		}, {
			ID: 2, Listener: proxy.ListenerTCP, Started: at(800 * time.Millisecond), Upstream: "wss://feed.example/v1",
		}},
	}
}

// The document carries the Server's status as /status promises it: times
// in UTC, durations in seconds to the millisecond, the downtime measured
// from the document's now, a session still in its handshake named so, and
// events that never happened left out.
func TestBuild(t *testing.T) {
	doc := Build(twoSessions(), "websocket", "v1.2.3", now)
	if doc.Version != "v1.2.3" || doc.UpstreamKind != "websocket" || !doc.Draining || doc.MaxSessions != 8 || len(doc.Sessions) != 2 {
		t.Fatalf("document %+v", doc)
	}
	if m := doc.Memory; m == nil || *m != (Memory{LimitBytes: 64 << 20, ShareBytes: 1 << 20, UsedBytes: 48 << 20, PausedSessions: 2, Pauses: 5, Full: true}) {
		t.Errorf("memory %+v", doc.Memory)
	}
	s := doc.Sessions[0]
	if s.State != "waiting" || s.Connections != 4 || s.Attempt != 3 || s.Reconnects != 2 || s.Listener != "ws" {
		t.Errorf("session 1: state %q, connections %d, attempt %d, reconnects %d, listener %q", s.State, s.Connections, s.Attempt, s.Reconnects, s.Listener)
	}
	if s.Started.Location() != time.UTC || !s.Started.Equal(now.Add(-2*time.Hour-10*time.Minute)) {
		t.Errorf("started %v, want it in UTC", s.Started)
	}
	if s.DownSince == nil || s.DownSeconds != 95 || s.NextRetry == nil || !s.NextRetry.Equal(now.Add(2500*time.Millisecond)) || s.NextRetry.Location() != time.UTC {
		t.Errorf("down since %v (%v s), next retry %v", s.DownSince, s.DownSeconds, s.NextRetry)
	}
	if c := s.LastClose; c == nil || c.Event != "lost" || c.CloseCode != 1012 || c.CloseReason != "<restart>" || c.DelaySeconds != 1.5 {
		t.Errorf("last close %+v, want the 1012 with its delay rounded to 1.5 s", c)
	}
	if f := s.LastFailure; f == nil || f.Event != "dial_failed" || f.Reason != "refused" || f.Attempt != 3 || f.DelaySeconds != 4 {
		t.Errorf("last failure %+v", f)
	}
	if len(s.Recent) != 3 || s.Recent[0].Event != "connected" || s.Recent[2].Event != "dial_failed" {
		t.Errorf("recent %+v, want the three events oldest first", s.Recent)
	}
	if s.Gaps["filled"] != 2 || s.Recoveries["resume"] != 2 || s.Duplicates != 7 || s.OutboxMessages != 3 || s.MemoryHeld != 4096 {
		t.Errorf("counts %+v", s)
	}
	h := doc.Sessions[1]
	if h.State != "handshake" || h.LastClose != nil || h.LastFailure != nil || h.DownSince != nil || h.NextRetry != nil || h.Recent == nil {
		t.Errorf("handshake session %+v: want state handshake, no events, an empty recent list", h)
	}
}

// The JSON names are the ones docs/design.md and `tether status` read;
// optional fields are left out when empty, lists are [] rather than null.
func TestDocJSON(t *testing.T) {
	doc := Build(twoSessions(), "websocket", "v1", now)
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Memory   map[string]any   `json:"memory"`
		Sessions []map[string]any `json:"sessions"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"id", "listener", "started", "upstream", "state", "live", "connections", "attempt", "next_retry",
		"down_since", "down_seconds", "last_close", "last_failure", "reconnects", "outbox_messages", "outbox_bytes",
		"memory_held_bytes", "duplicates_dropped", "gaps", "recoveries", "recent"} {
		if _, ok := m.Sessions[0][key]; !ok {
			t.Errorf("session 1 lacks %q: %s", key, raw)
		}
	}
	for _, key := range []string{"next_retry", "down_since", "last_close", "last_failure", "gave_up"} {
		if _, ok := m.Sessions[1][key]; ok {
			t.Errorf("handshake session has %q", key)
		}
	}
	if r, ok := m.Sessions[1]["recent"].([]any); !ok || len(r) != 0 {
		t.Errorf("handshake session's recent = %v, want []", m.Sessions[1]["recent"])
	}
	if m.Memory["full"] != true || m.Memory["paused_sessions"] != float64(2) {
		t.Errorf("memory %v", m.Memory)
	}
	empty, err := json.Marshal(Build(proxy.Status{MaxSessions: 1}, "sse", "v1", now))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(empty, []byte(`"sessions":[]`)) || bytes.Contains(empty, []byte(`"memory"`)) {
		t.Errorf("no session, no budget: %s", empty)
	}
}

// `tether status` prints a header naming the drain and the full budget,
// one row per session, then each session's events, newest first.
func TestWrite(t *testing.T) {
	var b strings.Builder
	if err := Write(&b, Build(twoSessions(), "websocket", "v1.2.3", now)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	want := "tether v1.2.3 · websocket upstream · 2 of at most 8 sessions · DRAINING · MEMORY BUDGET FULL: 2 SESSIONS PAUSED, 48MIB OF 64MIB USED · 2026-03-01T12:00:00Z"
	if lines[0] != want {
		t.Errorf("header\n%q, want\n%q", lines[0], want)
	}
	if !strings.HasPrefix(lines[2], "SESSION ") || !strings.Contains(lines[2], "LAST FAILURE") {
		t.Errorf("no column heads: %q", lines[2])
	}
	row := strings.Fields(lines[3])
	for i, w := range []string{"#1", "ws", "waiting", "3", "in", "2.5s", "1m35s", "1012", `"<restart>",`, "1m30s", "ago"} {
		if i >= len(row) || row[i] != w {
			t.Fatalf("session row %q: field %d is not %q", lines[3], i, w)
		}
	}
	for _, w := range []string{"refused, attempt 3, retry after 4.0s", "3 msg, 120 B", "gap filled 2, gap skipped 1, recovered by resume 2, duplicates 7"} {
		if !strings.Contains(lines[3], w) {
			t.Errorf("session row %q lacks %q", lines[3], w)
		}
	}
	if row := strings.Fields(lines[4]); len(row) < 3 || row[0] != "#2" || row[1] != "tcp" || row[2] != "handshake" {
		t.Errorf("handshake row %q", lines[4])
	}
	events := out[strings.Index(out, "\n#1 wss://feed.example/v1, 2h10m old\n"):]
	first, second := strings.Index(events, "dial failed"), strings.Index(events, "connected")
	if first < 0 || second < 0 || first > second {
		t.Errorf("events not newest first:\n%s", events)
	}
	if !strings.Contains(events, "1m30s ago  lost        close 1012 \"<restart>\", attempt 1, retry after 1.5s") {
		t.Errorf("events lack the close:\n%s", events)
	}

	b.Reset()
	if err := Write(&b, Build(proxy.Status{MaxSessions: 4}, "sse", "v1", now)); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "tether v1 · sse upstream · 0 of at most 4 sessions · 2026-03-01T12:00:00Z\n\nNo app is connected.\n" {
		t.Errorf("no session:\n%s", got)
	}
}

// The page has a row per session that names its state, escapes what the
// upstream sent (a close reason), shows the full budget, and says in its
// title how many sessions are not confirmed.
func TestHTML(t *testing.T) {
	page, err := HTML(Build(twoSessions(), "websocket", "v1.2.3", now))
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, w := range []string{
		"<title>tether: 2 sessions, 2 not confirmed</title>",
		`<meta http-equiv="refresh" content="2">`,
		`<tr class="session" id="session-1" data-state="waiting">`,
		`<tr class="session" id="session-2" data-state="handshake">`,
		`<span class="draining">draining</span>`,
		`id="memory-full">memory budget full: 2 sessions paused</span>`,
		template.HTMLEscapeString(`1012 "<restart>"`),
	} {
		if !strings.Contains(s, w) {
			t.Errorf("page lacks %s", w)
		}
	}
	if strings.Contains(s, "<restart>") || strings.Contains(s, "<script") {
		t.Error("page has an unescaped close reason or a script")
	}
	empty, err := HTML(Build(proxy.Status{MaxSessions: 1}, "websocket", "v1", now))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(empty, []byte("<title>tether: 0 sessions</title>")) || !bytes.Contains(empty, []byte("No app is connected.")) {
		t.Errorf("empty page:\n%s", empty)
	}
}

// Durations read as people write them, a negative one (clock skew) as 0.
func TestShort(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0ms", 850 * time.Millisecond: "850ms", 4200 * time.Millisecond: "4.2s",
		185 * time.Second: "3m05s", 2*time.Hour + 10*time.Minute + 59*time.Second: "2h10m",
	} {
		if got := short(d); got != want {
			t.Errorf("short(%v) = %q, want %q", d, got, want)
		}
	}
}

// Durations are written to the millisecond as JSON shows them: 1.235, not
// the nearest float's 1.2349999999999999 (Duration.Seconds of 1.235 s).
func TestSecondsInJSON(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1234999999 * time.Nanosecond: "1.235",
		1235 * time.Millisecond:      "1.235",
		95 * time.Second:             "95",
		1500 * time.Microsecond:      "0.002",
		0:                            "0",
	} {
		b, err := json.Marshal(seconds(d))
		if err != nil || string(b) != want {
			t.Errorf("seconds(%v) in JSON = %s (%v), want %s", d, b, err, want)
		}
	}
}
