package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
)

// MaxOutput is the most bytes a template may render. The rendered text is
// one WebSocket message or one URL; a template that renders more is broken,
// and the cap stops it before it takes memory.
const MaxOutput = 1 << 20

// funcs are the functions every template can call (see the package doc),
// and text/template's own functions that build a string, which these
// replace with the same function under a cap. Every string a function
// returns is capped at MaxOutput: functions feed each other and
// variables, and a few of them in a row ({{$x = printf "%s%s" $x $x}},
// js or json of a string of backslashes) double a string at each step,
// taking all memory before any output reaches limitedWriter.
var funcs = template.FuncMap{
	"json": func(v any) (string, error) {
		s, err := jsonValue(v)
		if err != nil {
			return "", err
		}
		return capped(s)
	},
	"query":    func(v any) (string, error) { return capped(url.QueryEscape(fmt.Sprint(v))) },
	"path":     func(v any) (string, error) { return capped(url.PathEscape(fmt.Sprint(v))) },
	"get":      func(message, path string) (string, error) { return capped(getValue(message, path)) },
	"print":    func(a ...any) (string, error) { return capped(fmt.Sprint(a...)) },
	"printf":   func(format string, a ...any) (string, error) { return capped(fmt.Sprintf(format, a...)) },
	"println":  func(a ...any) (string, error) { return capped(fmt.Sprintln(a...)) },
	"html":     func(a ...any) (string, error) { return capped(template.HTMLEscaper(a...)) },
	"js":       func(a ...any) (string, error) { return capped(template.JSEscaper(a...)) },
	"urlquery": func(a ...any) (string, error) { return capped(template.URLQueryEscaper(a...)) },
}

// capped returns s, or an error when s is longer than a template may render.
func capped(s string) (string, error) {
	if len(s) > MaxOutput {
		return "", fmt.Errorf("%w: a function returned more than %d bytes", ErrOutputTooLarge, MaxOutput)
	}
	return s, nil
}

// jsonValue encodes v as JSON without HTML escaping: the result goes into a
// WebSocket message, not an HTML page, and "\u003c" where the server
// expects "<" would only surprise it.
func jsonValue(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// Template is a parsed and validated text/template. It is immutable and
// safe for concurrent use.
type Template struct {
	tmpl *template.Template
	text string
}

// Parse parses text as the template called name (which errors mention),
// and validates it by rendering it once with sample, the kind of value it
// will be executed with. A template that fails on the sample, that uses
// range, that calls itself, or that renders more than MaxOutput bytes is
// rejected.
func Parse(name, text string, sample any) (*Template, error) {
	tmpl, err := template.New(name).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, err
	}
	if usesRange(tmpl) {
		return nil, fmt.Errorf("template: %s: %w", name, ErrRange)
	}
	if recursive(tmpl) {
		return nil, fmt.Errorf("template: %s: %w", name, ErrRecursion)
	}
	t := &Template{tmpl: tmpl, text: text}
	if _, err := t.Execute(sample); err != nil {
		return nil, withFieldHint(err, sample)
	}
	return t, nil
}

// Execute renders the template with data into a new slice.
func (t *Template) Execute(data any) ([]byte, error) {
	return t.Append(nil, data)
}

// Append renders the template with data at the end of dst and returns the
// extended slice, so a caller can reuse its buffer. On error dst is
// returned with whatever part of the output was rendered.
func (t *Template) Append(dst []byte, data any) ([]byte, error) {
	w := &limitedWriter{buf: dst, limit: len(dst) + MaxOutput}
	err := t.tmpl.Execute(w, data)
	return w.buf, err
}

// String returns the template's source text.
func (t *Template) String() string { return t.text }

// limitedWriter appends to buf and fails once it would pass limit bytes,
// which makes text/template stop executing.
type limitedWriter struct {
	buf   []byte
	limit int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > w.limit-len(w.buf) {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrOutputTooLarge, MaxOutput)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// usesRange reports whether any template defined in t contains a range
// action.
func usesRange(t *template.Template) bool {
	found := false
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			walk(tt.Tree.Root, func(n parse.Node) {
				_, isRange := n.(*parse.RangeNode)
				found = found || isRange
			})
		}
	}
	return found
}

// recursive reports whether a template defined in t calls itself,
// directly or through others. text/template stops a recursion only at a
// depth of 100,000, each level holding its own value: a recursion on a
// string that printf lengthens takes that many times MaxOutput.
func recursive(t *template.Template) bool {
	calls := map[string][]string{}
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			walk(tt.Tree.Root, func(n parse.Node) {
				if c, ok := n.(*parse.TemplateNode); ok {
					calls[tt.Name()] = append(calls[tt.Name()], c.Name)
				}
			})
		}
	}
	const onPath, done = 1, 2
	state := map[string]int{}
	var cycle func(name string) bool
	cycle = func(name string) bool {
		switch state[name] {
		case onPath:
			return true
		case done:
			return false
		}
		state[name] = onPath
		for _, c := range calls[name] {
			if cycle(c) {
				return true
			}
		}
		state[name] = done
		return false
	}
	for name := range calls {
		if cycle(name) {
			return true
		}
	}
	return false
}

// walk calls visit for n and every node under it. Actions nest only inside
// lists and the branches of if, with and range, so those are the only
// nodes to descend into.
func walk(n parse.Node, visit func(parse.Node)) {
	visit(n)
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walk(c, visit)
		}
	case *parse.IfNode:
		walk(n.List, visit)
		walk(n.ElseList, visit)
	case *parse.WithNode:
		walk(n.List, visit)
		walk(n.ElseList, visit)
	case *parse.RangeNode:
		walk(n.List, visit)
		walk(n.ElseList, visit)
	}
}

// withFieldHint adds the field names of sample's type to an execution
// error: a misspelt field is the most likely mistake in a configuration
// variable, and text/template's message names the Go type, not the fields.
func withFieldHint(err error, sample any) error {
	var exec template.ExecError
	if !errors.As(err, &exec) {
		return err
	}
	typ := reflect.TypeOf(sample)
	if typ == nil || typ.Kind() != reflect.Struct || typ.NumField() == 0 {
		return err
	}
	names := make([]string, typ.NumField())
	for i := range names {
		names[i] = "." + typ.Field(i).Name
	}
	return fmt.Errorf("%w (the fields are %s)", err, strings.Join(names, " "))
}
