// Package template renders the message and URL templates of tether's
// configuration: TETHER_RESUME_MESSAGE, TETHER_GAP_NOTICE and
// TETHER_GAPFILL_URL, TETHER_SUBSCRIBE_REPLAY (docs/design.md "Restoring the application" and "Sequences
// and gap filling").
//
// Templates are Go text/template with four functions:
//
//   - json encodes its argument as JSON: {{json .Session}} renders "abc"
//     with the quotes, and escapes quotes, backslashes and control
//     characters, so a value cannot break out of the message it is put in.
//     HTML characters (<, >, &) are left as they are.
//   - query escapes its argument for a URL query value (url.QueryEscape):
//     ?stream={{query .Stream}}.
//   - path escapes its argument for one URL path segment (url.PathEscape):
//     /streams/{{path .Stream}}/events.
//   - get reads a value out of a JSON text with a gjson path and renders it
//     as JSON, as the text holds it, "null" when absent: {{get .Message
//     "id"}} renders 7 or "r7" (TETHER_SUBSCRIBE_REPLAY rebuilds the app's
//     subscribe from its parts).
//
// Nothing is escaped implicitly: {{.Stream}} renders the raw value, which
// is right for numbers and for values known to be safe, and wrong for a
// stream name put in a URL or a JSON string. TETHER_GAPFILL_URL and
// TETHER_RESYNC_URL therefore want query or path around every string field.
//
// Each configuration variable has its own type ([ResumeMessage],
// [GapNotice], [GapFillURL], [ResyncURL], [SubscribeReplay]) that parses
// with UnmarshalText, so the configuration loader fills it directly, and
// renders from a typed data value ([Resume], [Gap], [Snapshot], [Replay]).
// Parsing executes the template once against a sample value, so a misspelt field ({{.Sesion}}) or a function misuse is
// reported when tether starts, not at the first reconnect; a URL template
// must also render an absolute http or https URL. Templates are rendered
// with missingkey=error, and may not use range or call themselves: the
// data holds only scalar fields, a loop over an integer literal could only
// stall rendering, and a recursion could only take memory. Output is
// capped at [MaxOutput] bytes, and so is every string a function returns,
// text/template's own (printf, js, ...) included.
//
// Concurrency: a parsed template is immutable and safe for concurrent use;
// every call renders into its own buffer.
package template
