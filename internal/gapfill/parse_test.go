package gapfill

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		contentType string
		want        []string
	}{
		{
			name: "JSON array keeps each element's bytes",
			body: `[{"seq":1,"b":"x"}, {"seq": 2} ,` + "\n" + `{"seq":3,"n":[1,2]}]`,
			want: []string{`{"seq":1,"b":"x"}`, `{"seq": 2}`, `{"seq":3,"n":[1,2]}`},
		},
		{
			name:        "JSON array with its content type and surrounding blanks",
			body:        "\n  [\"a\", 1, null, [2]]  \n",
			contentType: "application/json; charset=utf-8",
			want:        []string{`"a"`, `1`, `null`, `[2]`},
		},
		{
			name: "empty array",
			body: `[ ]`,
			want: nil,
		},
		{
			name: "NDJSON recognised by its first byte",
			body: "{\"seq\":1}\n{\"seq\":2}\n",
			want: []string{`{"seq":1}`, `{"seq":2}`},
		},
		{
			name: "CRLF NDJSON, blank lines and no final newline",
			body: "{\"seq\":1}\r\n\r\n  \r\n{\"seq\":2}\r\n{\"seq\":3}",
			want: []string{`{"seq":1}`, `{"seq":2}`, `{"seq":3}`},
		},
		{
			name:        "NDJSON content type wins over a leading bracket",
			body:        "[1,2]\n[3]\n",
			contentType: "application/x-ndjson",
			want:        []string{`[1,2]`, `[3]`},
		},
		{
			name:        "jsonl content type",
			body:        "[1]\n",
			contentType: "application/jsonl",
			want:        []string{`[1]`},
		},
		{name: "empty body", body: "", want: nil},
		{name: "blank body", body: " \r\n\t\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.body), tt.contentType)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if strings.Join(asStrings(got), "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("Parse = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		contentType string
		want        ParseError // Err is compared by message substring
		msg         string
	}{
		{
			name: "bad element names its index",
			body: `[{"seq":1}, nope, {"seq":3}]`,
			want: ParseError{Element: 2, Offset: 12},
			msg:  "gapfill: JSON array element 2 (byte 12): invalid character 'o' in literal null (expecting 'u')",
		},
		{
			name: "missing comma",
			body: `[1 2]`,
			want: ParseError{Element: 2, Offset: 3},
			msg:  "after array element",
		},
		{
			name: "truncated array",
			body: `[{"seq":1},{"seq":`,
			want: ParseError{Element: 2, Offset: 11},
			msg:  "unexpected end of answer",
		},
		{
			name: "unclosed array",
			body: `[1, 2`,
			want: ParseError{Offset: 5},
			msg:  "gapfill: JSON array (byte 5): unexpected end of answer",
		},
		{
			name: "data after the array",
			body: `[1] [2]`,
			want: ParseError{Offset: 5},
			msg:  "data after the closing bracket",
		},
		{
			name: "invalid UTF-8 in an element",
			body: "[\"\xff\"]",
			want: ParseError{Element: 1, Offset: 1},
			msg:  "not valid UTF-8",
		},
		{
			name: "bad NDJSON line names its number",
			body: "{\"seq\":1}\r\n\r\n<html>\r\n",
			want: ParseError{Line: 3, Offset: 13},
			msg:  "gapfill: NDJSON line 3 (byte 13): invalid character '<' looking for beginning of value",
		},
		{
			name: "two values on one line",
			body: "{\"seq\":1} {\"seq\":2}\n",
			want: ParseError{Line: 1},
			msg:  "data after the JSON value",
		},
		{
			name: "truncated last line",
			body: "{\"seq\":1}\n{\"seq\":",
			want: ParseError{Line: 2, Offset: 10},
			msg:  "unexpected end of answer",
		},
		{
			name: "invalid UTF-8 on a line",
			body: "\"\xc3\x28\"\n",
			want: ParseError{Line: 1},
			msg:  "not valid UTF-8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.body), tt.contentType)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %q, %v; want a *ParseError", got, err)
			}
			if pe.Element != tt.want.Element || pe.Line != tt.want.Line || pe.Offset != tt.want.Offset {
				t.Errorf("element %d, line %d, offset %d; want %d, %d, %d", pe.Element, pe.Line, pe.Offset, tt.want.Element, tt.want.Line, tt.want.Offset)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
			if Transient(err) {
				t.Error("a parse error is transient")
			}
		})
	}
}

func asStrings(msgs [][]byte) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m)
	}
	return out
}
