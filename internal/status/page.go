package status

import (
	"bytes"
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"
)

// Refresh is how often the status page reloads itself.
const Refresh = 2 * time.Second

// HTML renders doc as the status page: one row per session, reloaded every
// Refresh by a meta refresh (no script, no asset from anywhere, so the page
// can be served under a Content-Security-Policy that forbids both).
func HTML(doc Doc) ([]byte, error) {
	var b bytes.Buffer
	if err := statusTemplate.Execute(&b, pageOf(doc)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// view is what the template renders: the document, with the times
// turned into durations relative to its Now.
type view struct {
	Doc
	Refresh  int
	Rows     []sessionRow
	Problems int // sessions not confirmed
}

type sessionRow struct {
	Session
	Age       string
	Down      string // "" while confirmed
	NextIn    string // "" unless waiting
	LastClose string // "1012 restart, 3s ago"
	Failure   string // "refused, attempt 3"
	Gaps      string // "filled 2, skipped 1"
	Events    []eventRow
	Healthy   bool
}

type eventRow struct {
	Ago, Event, Detail string
}

func pageOf(doc Doc) view {
	v := view{Doc: doc, Refresh: int(Refresh / time.Second)}
	for _, s := range doc.Sessions {
		r := sessionRow{Session: s, Age: ago(doc.Now, s.Started), Healthy: s.State == "confirmed"}
		if !r.Healthy {
			v.Problems++
		}
		if s.DownSince != nil {
			r.Down = short(time.Duration(s.DownSeconds * float64(time.Second)))
		}
		if s.NextRetry != nil {
			r.NextIn = "in " + short(s.NextRetry.Sub(doc.Now))
		}
		if c := s.LastClose; c != nil {
			r.LastClose = closeText(c) + ", " + ago(doc.Now, c.At) + " ago"
		}
		if f := s.LastFailure; f != nil {
			r.Failure = eventDetail(*f)
		}
		r.Gaps = countsText(s.Gaps, s.Recoveries, s.Duplicates)
		for i := len(s.Recent) - 1; i >= 0; i-- { // newest first
			e := s.Recent[i]
			r.Events = append(r.Events, eventRow{Ago: ago(doc.Now, e.At), Event: strings.ReplaceAll(e.Event, "_", " "), Detail: eventDetail(e)})
		}
		v.Rows = append(v.Rows, r)
	}
	return v
}

// eventDetail describes an event in a few words: why, which attempt, what
// delay or downtime followed.
func eventDetail(e Event) string {
	var parts []string
	switch {
	case e.CloseCode != 0:
		parts = append(parts, "close "+closeText(&e))
	case e.HTTPStatus != 0:
		parts = append(parts, fmt.Sprintf("HTTP %d", e.HTTPStatus))
	case e.Reason != "":
		parts = append(parts, e.Reason)
	}
	if e.Attempt > 0 {
		parts = append(parts, fmt.Sprintf("attempt %d", e.Attempt))
	}
	if e.DelaySeconds > 0 {
		parts = append(parts, "retry after "+short(secondsDuration(e.DelaySeconds)))
	}
	if e.DowntimeSeconds > 0 {
		parts = append(parts, "down "+short(secondsDuration(e.DowntimeSeconds)))
	}
	return strings.Join(parts, ", ")
}

func closeText(e *Event) string {
	if e.CloseReason == "" {
		return fmt.Sprint(e.CloseCode)
	}
	return fmt.Sprintf("%d %q", e.CloseCode, e.CloseReason)
}

// countsText lists the sequencing's outcomes that happened, by name.
func countsText(gaps, recoveries map[string]uint64, duplicates uint64) string {
	var parts []string
	add := func(prefix string, m map[string]uint64) {
		names := make([]string, 0, len(m))
		for name := range m {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			parts = append(parts, fmt.Sprintf("%s%s %d", prefix, name, m[name]))
		}
	}
	add("gap ", gaps)
	add("recovered by ", recoveries)
	if duplicates > 0 {
		parts = append(parts, fmt.Sprintf("duplicates %d", duplicates))
	}
	return strings.Join(parts, ", ")
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func ago(now, t time.Time) string { return short(now.Sub(t)) }

// short prints a duration for people: 850ms, 4.2s, 3m05s, 2h10m.
func short(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

var statusTemplate = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tether: {{len .Rows}} session{{if ne (len .Rows) 1}}s{{end}}{{if .Problems}}, {{.Problems}} not confirmed{{end}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2330; background: #fafbfc; }
h1 { font-size: 1.3em; margin: 0 0 .2em; }
.meta { color: #5a6270; margin-bottom: 1em; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .45em .6em; border-bottom: 1px solid #e3e6ea; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.state { display: inline-block; padding: .1em .55em; border-radius: .8em; font-weight: 600; color: #fff; }
.confirmed { background: #1f8a4c; } .open { background: #5aa469; }
.connecting, .waiting, .handshake { background: #c77d00; }
.lost, .closed { background: #c0392b; }
tr.recent td { border-bottom: 2px solid #d5d9de; color: #4a5260; font-size: .9em; padding-top: 0; }
.event { white-space: nowrap; margin-right: 1.2em; }
.event b { font-weight: 600; }
.none { color: #8a919c; }
.draining { color: #c0392b; font-weight: 600; }
</style>
</head>
<body>
<h1>tether {{.Version}}</h1>
<div class="meta">{{len .Rows}} of at most {{.MaxSessions}} sessions · {{.UpstreamKind}} upstream{{if .Draining}} · <span class="draining">draining</span>{{end}}{{with .Memory}} · memory {{.UsedBytes}} of {{.LimitBytes}} B{{if .Full}} · <span class="draining" id="memory-full">memory budget full: {{.PausedSessions}} sessions paused</span>{{end}}{{end}} · {{.Now.Format "2006-01-02 15:04:05 MST"}} · refreshes every {{.Refresh}}s · <a href="status">JSON</a></div>
<table id="sessions">
<thead><tr><th>session</th><th>upstream</th><th>state</th><th>attempt</th><th>next retry</th><th>down for</th><th>last close</th><th>last failure</th><th>outbox</th><th>reconnects</th><th>gaps</th></tr></thead>
<tbody>
{{- range .Rows}}
<tr class="session" id="session-{{.ID}}" data-state="{{.State}}">
<td>#{{.ID}} {{.Listener}}<br><span class="none">{{.Age}} old</span></td>
<td>{{.Upstream}}</td>
<td><span class="state {{.State}}">{{.State}}</span>{{if .GaveUp}}<br>gave up: {{.GaveUp}}{{end}}</td>
<td class="num">{{.Attempt}}</td>
<td>{{if .NextIn}}{{.NextIn}}{{else}}<span class="none">–</span>{{end}}</td>
<td>{{if .Down}}{{.Down}}{{else}}<span class="none">up</span>{{end}}</td>
<td>{{if .LastClose}}{{.LastClose}}{{else}}<span class="none">none</span>{{end}}</td>
<td>{{if .Failure}}{{.Failure}}{{else}}<span class="none">none</span>{{end}}</td>
<td class="num">{{.OutboxMessages}} msg<br><span class="none">{{.OutboxBytes}} B</span></td>
<td class="num">{{.Reconnects}}</td>
<td>{{if .Gaps}}{{.Gaps}}{{else}}<span class="none">none</span>{{end}}</td>
</tr>
<tr class="recent" id="recent-{{.ID}}"><td colspan="11">{{range .Events}}<span class="event">{{.Ago}} ago <b>{{.Event}}</b>{{if .Detail}} {{.Detail}}{{end}}</span> {{else}}<span class="none">no events yet</span>{{end}}</td></tr>
{{- else}}
<tr><td colspan="11" class="none">No app is connected.</td></tr>
{{- end}}
</tbody>
</table>
</body>
</html>
`))
