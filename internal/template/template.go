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

// funcs are the functions every template can call (see the package doc).
var funcs = template.FuncMap{
	"json":  jsonValue,
	"query": func(v any) string { return url.QueryEscape(fmt.Sprint(v)) },
	"path":  func(v any) string { return url.PathEscape(fmt.Sprint(v)) },
	"get":   getValue,
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
// range, or that renders more than MaxOutput bytes is rejected.
func Parse(name, text string, sample any) (*Template, error) {
	tmpl, err := template.New(name).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, err
	}
	if usesRange(tmpl) {
		return nil, fmt.Errorf("template: %s: %w", name, ErrRange)
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
// action. Ranges only nest inside lists and the branches of if, with and
// range, so those are the only nodes to walk.
func usesRange(t *template.Template) bool {
	for _, tt := range t.Templates() {
		if tt.Tree != nil && hasRange(tt.Tree.Root) {
			return true
		}
	}
	return false
}

func hasRange(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			if hasRange(c) {
				return true
			}
		}
	case *parse.RangeNode:
		return true
	case *parse.IfNode:
		return hasRange(n.List) || hasRange(n.ElseList)
	case *parse.WithNode:
		return hasRange(n.List) || hasRange(n.ElseList)
	}
	return false
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
