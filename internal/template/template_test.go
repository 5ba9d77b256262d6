package template

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestResumeMessage(t *testing.T) {
	tests := []struct {
		name string
		text string
		data Resume
		want string
	}{
		{
			name: "docs/design.md example",
			text: `{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`,
			data: Resume{Session: "S", LastSeq: 41},
			want: `{"t":"resume","session":"S","after":41}`,
		},
		{
			name: "json escapes what would break the message",
			text: `{"session":{{json .Session}}}`,
			data: Resume{Session: "a\"b\\c\n\x01"},
			want: `{"session":"a\"b\\c\n\u0001"}`,
		},
		{
			name: "json keeps HTML characters and non-ASCII text",
			text: `{{json .Stream}}`,
			data: Resume{Stream: "<a&b> é"},
			want: `"<a&b> é"`,
		},
		{
			name: "json of a number and of the whole value",
			text: `{{json .LastSeq}} {{json .}}`,
			data: Resume{Session: "s", LastSeq: -9007199254740993, Stream: "x"},
			want: `-9007199254740993 {"Session":"s","LastSeq":-9007199254740993,"Stream":"x"}`,
		},
		{
			name: "per-stream resume",
			text: `{"op":"resume","channel":{{json .Stream}},"from":{{.LastSeq}}}`,
			data: Resume{Stream: "trades.BTC", LastSeq: 7},
			want: `{"op":"resume","channel":"trades.BTC","from":7}`,
		},
		{
			name: "conditionals on the data",
			text: `{{if .Session}}{"resume":{{json .Session}}}{{else}}{"hello":1}{{end}}`,
			data: Resume{},
			want: `{"hello":1}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m ResumeMessage
			if err := m.UnmarshalText([]byte(tt.text)); err != nil {
				t.Fatalf("UnmarshalText: %v", err)
			}
			got, err := m.Render(tt.data)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("Render = %s, want %s", got, tt.want)
			}
			if m.String() != tt.text || !m.IsSet() {
				t.Fatalf("String() = %q, IsSet %v", m.String(), m.IsSet())
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		contains []string
		is       error
	}{
		{
			name:     "misspelt field names the fields",
			text:     `{"session":{{json .Sesion}}}`,
			contains: []string{"resume message", "Sesion", "(the fields are .Session .LastSeq .Stream)"},
		},
		{
			name:     "unknown function",
			text:     `{{quote .Session}}`,
			contains: []string{"resume message", `function "quote" not defined`},
		},
		{
			name:     "syntax error",
			text:     `{"after":{{.LastSeq}`,
			contains: []string{"resume message:1"},
		},
		{
			name: "range at the top",
			text: `{{range 3}}x{{end}}`,
			is:   ErrRange,
		},
		{
			name: "range inside if, with and a defined template",
			text: `{{define "t"}}{{with .}}{{if .}}{{range 1000000000}}{{end}}{{end}}{{end}}{{end}}x`,
			is:   ErrRange,
		},
		{
			name: "runaway recursion",
			text: `{{define "t"}}{{template "t" .}}{{end}}{{template "t" .}}`,
			is:   ErrRecursion,
		},
		{
			name: "recursion through another template, in an else branch",
			text: `{{define "a"}}{{if .}}x{{else}}{{template "b" .}}{{end}}{{end}}{{define "b"}}{{template "a" .}}{{end}}`,
			is:   ErrRecursion,
		},
		{
			name: "printf doubling a variable",
			text: `{{$x := printf "%0999d" 0}}` + strings.Repeat(`{{$x = printf "%s%s" $x $x}}`, 11) + `{{len $x}}`,
			is:   ErrOutputTooLarge,
		},
		{
			name: "js doubling backslashes",
			text: `{{"\\"` + strings.Repeat(" | js", 21) + ` | len}}`,
			is:   ErrOutputTooLarge,
		},
		{
			name: "json doubling backslashes",
			text: `{{"\\"` + strings.Repeat(" | json", 21) + ` | len}}`,
			is:   ErrOutputTooLarge,
		},
		{
			name: "output over the cap",
			text: strings.Repeat("x", MaxOutput+1),
			is:   ErrOutputTooLarge,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m ResumeMessage
			err := m.UnmarshalText([]byte(tt.text))
			if err == nil {
				t.Fatal("UnmarshalText accepted it")
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if m.IsSet() {
				t.Error("a rejected template is set")
			}
		})
	}
}

func TestEmptyTextIsUnset(t *testing.T) {
	var (
		m ResumeMessage
		n GapNotice
		u GapFillURL
	)
	for _, v := range []interface{ UnmarshalText([]byte) error }{&m, &n, &u} {
		if err := v.UnmarshalText(nil); err != nil {
			t.Fatalf("%T.UnmarshalText(empty): %v", v, err)
		}
	}
	if m.IsSet() || n.IsSet() || u.IsSet() || m.String() != "" || u.String() != "" || n.String() != "" {
		t.Fatal("empty text set a template")
	}
}

func TestGapNotice(t *testing.T) {
	var n GapNotice
	text := `{"t":"gap","stream":{{json .Stream}},"from":{{.From}},"to":{{.To}}}`
	if err := n.UnmarshalText([]byte(text)); err != nil {
		t.Fatal(err)
	}
	got, err := n.Render(Gap{Stream: "orders", From: 42, To: 45})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"t":"gap","stream":"orders","from":42,"to":45}`; string(got) != want {
		t.Fatalf("Render = %s, want %s", got, want)
	}
	if err := n.UnmarshalText([]byte(`{{.LastSeq}}`)); err == nil || !strings.Contains(err.Error(), ".Stream .From .To .Session") {
		t.Fatalf("a resume field in a gap notice: %v", err)
	}
}

func TestGapFillURL(t *testing.T) {
	tests := []struct {
		name string
		text string
		data Gap
		want string
		err  string
	}{
		{
			name: "query and path escaping",
			text: `https://feed.example.com/v1/streams/{{path .Stream}}/events?from={{.From}}&to={{.To}}&session={{query .Session}}`,
			data: Gap{Stream: "a/b c", From: 1, To: 9, Session: "x&y=z"},
			want: `https://feed.example.com/v1/streams/a%2Fb%20c/events?from=1&to=9&session=x%26y%3Dz`,
		},
		{
			name: "plain http on loopback",
			text: `http://127.0.0.1:8081/catchup?after={{.From}}`,
			data: Gap{From: 3},
			want: `http://127.0.0.1:8081/catchup?after=3`,
		},
		{name: "websocket scheme", text: `wss://feed.example.com/{{.From}}`, err: `scheme "wss": want http or https`},
		{name: "relative", text: `/catchup?from={{.From}}`, err: `scheme "": want http or https`},
		{name: "no host", text: `http:///catchup`, err: "no host"},
		{name: "does not parse", text: `http://[::1/{{.From}}`, err: "rendered URL does not parse"},
		{name: "template error", text: `http://h/{{.Last}}`, err: "can't evaluate field Last"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u GapFillURL
			err := u.UnmarshalText([]byte(tt.text))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("UnmarshalText error %v, want one containing %q", err, tt.err)
				}
				if u.IsSet() {
					t.Fatal("a rejected URL template is set")
				}
				return
			}
			if err != nil {
				t.Fatalf("UnmarshalText: %v", err)
			}
			got, err := u.Render(tt.data)
			if err != nil || got != tt.want {
				t.Fatalf("Render = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestRenderErrorFromData shows validation cannot see every failure: a
// template that only fails for some data reports it when rendered.
func TestRenderErrorFromData(t *testing.T) {
	var n GapNotice
	if err := n.UnmarshalText([]byte(`{{if eq .Stream "x"}}{{index .Stream 5}}{{end}}ok`)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Render(Gap{Stream: "x"}); err == nil || !strings.Contains(err.Error(), "index out of range") {
		t.Fatalf("Render for the failing data: %v", err)
	}
	if got, err := n.Render(Gap{Stream: "y"}); err != nil || string(got) != "ok" {
		t.Fatalf("Render for other data: %q, %v", got, err)
	}
}

func TestParseWithMapDataMissingKey(t *testing.T) {
	tm, err := Parse("custom", `{{.a}}-{{.b}}`, map[string]int{"a": 1, "b": 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Execute(map[string]int{"a": 1}); err == nil || !strings.Contains(err.Error(), `map has no entry for key "b"`) {
		t.Fatalf("missing key: %v", err)
	}
}

func TestAppendReusesBuffer(t *testing.T) {
	tm, err := Parse("custom", `[{{.}}]`, 1)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	buf = append(buf, "prefix"...)
	out, err := tm.Append(buf, 42)
	if err != nil || string(out) != "prefix[42]" || &out[0] != &buf[:1][0] {
		t.Fatalf("Append = %q, %v (same array: %v)", out, err, len(out) > 0 && &out[0] == &buf[:1][0])
	}
	// The cap applies to what is rendered, not to what dst held already.
	big := make([]byte, MaxOutput)
	if _, err := tm.Append(big, 1); err != nil {
		t.Fatalf("Append after a full-size prefix: %v", err)
	}
}

func TestConcurrentRender(t *testing.T) {
	var m ResumeMessage
	if err := m.UnmarshalText([]byte(`{"session":{{json .Session}},"after":{{.LastSeq}}}`)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				d := Resume{Session: strings.Repeat("s", i), LastSeq: int64(j)}
				got, err := m.Render(d)
				want := `{"session":"` + d.Session + `","after":` + itoa(j) + `}`
				if err != nil || string(got) != want {
					errs <- errors.New("got " + string(got) + ", want " + want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func itoa(i int) string {
	b, _ := jsonValue(i)
	return b
}

func TestResyncURL(t *testing.T) {
	var u ResyncURL
	text := `https://api.example.com/api/v3/depth?symbol={{query .Stream}}&limit=1000`
	if err := u.UnmarshalText([]byte(text)); err != nil {
		t.Fatalf("UnmarshalText: %v", err)
	}
	got, err := u.Render(Snapshot{Stream: "BTC USDT"})
	if want := `https://api.example.com/api/v3/depth?symbol=BTC+USDT&limit=1000`; err != nil || got != want {
		t.Fatalf("Render = %q, %v; want %q", got, err, want)
	}
	for text, want := range map[string]string{
		`https://h/depth?from={{.From}}`: "can't evaluate field From",
		`ws://h/depth`:                   `scheme "ws": want http or https`,
	} {
		var bad ResyncURL
		if err := bad.UnmarshalText([]byte(text)); err == nil || !strings.Contains(err.Error(), want) || bad.IsSet() {
			t.Errorf("UnmarshalText(%q) = %v, set %v; want an error containing %q", text, err, bad.IsSet(), want)
		}
	}
}
