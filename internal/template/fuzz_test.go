package template

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzTemplate parses arbitrary template text as each of the three
// variables and renders what parses with arbitrary data: nothing may
// panic, output stays under MaxOutput, rendering is deterministic, and the
// json function always yields valid JSON that decodes to its input.
func FuzzTemplate(f *testing.F) {
	f.Add(`{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`, "S", int64(41), "a")
	f.Add(`https://h/s/{{path .Stream}}?from={{.From}}&to={{.To}}&s={{query .Session}}`, "x&y", int64(-1), "a/b")
	f.Add(`{{define "t"}}{{if .}}{{template "t" (slice . 1)}}{{end}}{{end}}{{template "t" .Stream}}`, "", int64(0), "abc")
	f.Add(`{{with .Session}}{{json .}}{{else}}null{{end}} {{printf "%q" .Stream}} {{len .Stream}}`, "\xff", int64(1<<62), "é")
	f.Add(`{{.Missing}} {{index .Stream 3}} {{call .Stream}}`, "", int64(0), "")
	f.Fuzz(func(t *testing.T, text, session string, seq int64, stream string) {
		// A template can call another twice, and that one a third twice:
		// short values keep the executions of such a chain few.
		if len(text) > 512 || len(session) > 16 || len(stream) > 16 {
			return
		}
		checkJSON(t, session)
		resume := Resume{Session: session, LastSeq: seq, Stream: stream}
		gap := Gap{Stream: stream, From: seq, To: seq + 3, Session: session}

		var m ResumeMessage
		if m.UnmarshalText([]byte(text)) == nil && m.IsSet() {
			renderTwice(t, func() ([]byte, error) { return m.Render(resume) })
		}
		var n GapNotice
		if n.UnmarshalText([]byte(text)) == nil && n.IsSet() {
			renderTwice(t, func() ([]byte, error) { return n.Render(gap) })
		}
		var u GapFillURL
		if u.UnmarshalText([]byte(text)) == nil && u.IsSet() {
			renderTwice(t, func() ([]byte, error) {
				s, err := u.Render(gap)
				return []byte(s), err
			})
		}
	})
}

func renderTwice(t *testing.T, render func() ([]byte, error)) {
	t.Helper()
	a, errA := render()
	b, errB := render()
	if len(a) > MaxOutput {
		t.Fatalf("rendered %d bytes, over MaxOutput", len(a))
	}
	if !bytes.Equal(a, b) || (errA == nil) != (errB == nil) {
		t.Fatalf("rendering twice differs: %q, %v then %q, %v", a, errA, b, errB)
	}
}

func checkJSON(t *testing.T, s string) {
	t.Helper()
	out, err := jsonValue(s)
	if err != nil {
		t.Fatalf("json(%q): %v", s, err)
	}
	var back string
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatalf("json(%q) = %s, not valid JSON: %v", s, out, err)
	}
	if utf8.ValidString(s) && back != s {
		t.Fatalf("json(%q) = %s decodes to %q", s, out, back)
	}
}
