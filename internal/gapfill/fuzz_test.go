package gapfill

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds arbitrary answers to Parse. Nothing may panic; every
// message returned is valid JSON and UTF-8, lies inside the body, and
// carries no surrounding blanks; a JSON array parses exactly when
// encoding/json accepts it (for UTF-8 bodies), with the same elements.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`[{"seq":1},{"seq":2}]`), false)
	f.Add([]byte("{\"seq\":1}\r\n\r\n{\"seq\":2}"), true)
	f.Add([]byte(`[1 2]`), false)
	f.Add([]byte(`[{"a":[1,{"b":"\u00e9"}]} , "x" ,null]  `), false)
	f.Add([]byte("[\"\xff\"]"), false)
	f.Add([]byte("1\n2 3\n"), false)
	f.Fuzz(func(t *testing.T, body []byte, ndjson bool) {
		contentType := "application/json"
		if ndjson {
			contentType = "application/x-ndjson"
		}
		msgs, err := Parse(body, contentType)
		if !ndjson {
			checkAgainstEncodingJSON(t, body, msgs, err)
		}
		if err != nil {
			return
		}
		for i, m := range msgs {
			if !json.Valid(m) || !utf8.Valid(m) {
				t.Fatalf("message %d %q is not valid JSON and UTF-8", i, m)
			}
			if len(m) == 0 || len(bytes.TrimSpace(m)) != len(m) {
				t.Fatalf("message %d %q is empty or has surrounding blanks", i, m)
			}
			if !within(m, body) {
				t.Fatalf("message %d is not a subslice of the body", i)
			}
		}
	})
}

// within reports whether m shares memory with, and lies inside, body.
func within(m, body []byte) bool {
	if len(m) == 0 || len(body) == 0 {
		return false
	}
	for off := 0; off+len(m) <= len(body); off++ {
		if &body[off] == &m[0] {
			return true
		}
	}
	return false
}

func checkAgainstEncodingJSON(t *testing.T, body []byte, msgs [][]byte, err error) {
	t.Helper()
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return
	}
	var want []json.RawMessage
	stdErr := json.Unmarshal(body, &want)
	switch {
	case err != nil && stdErr == nil && utf8.Valid(body):
		t.Fatalf("Parse rejected %q, which encoding/json accepts: %v", body, err)
	case err != nil:
		return
	case stdErr != nil:
		t.Fatalf("Parse accepted %q, which encoding/json rejects: %v", body, stdErr)
	}
	if len(want) != len(msgs) {
		t.Fatalf("Parse found %d elements, encoding/json %d", len(msgs), len(want))
	}
	for i := range want {
		if !bytes.Equal(bytes.TrimSpace(want[i]), msgs[i]) {
			t.Fatalf("element %d: Parse %q, encoding/json %q", i, msgs[i], want[i])
		}
	}
}
