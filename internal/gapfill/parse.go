package gapfill

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"unicode/utf8"
)

// ndjsonTypes are the media types that mean one JSON value per line. A
// body with another type, or none, is recognised by its first byte.
var ndjsonTypes = map[string]bool{
	"application/x-ndjson":    true,
	"application/ndjson":      true,
	"application/jsonl":       true,
	"application/jsonlines":   true,
	"application/x-jsonlines": true,
}

// Parse splits an answer body into messages. With an NDJSON Content-Type
// (application/x-ndjson, application/jsonl and their variants) the body is
// NDJSON; otherwise a body whose first non-blank byte is '[' is a JSON
// array of messages, and any other body is NDJSON. An upstream whose
// messages are themselves arrays must therefore label NDJSON answers.
//
// Each message is returned as its raw JSON bytes, a subslice of body. A
// body that is empty or blank holds no messages. Messages must be valid
// JSON and valid UTF-8, since they are forwarded as WebSocket text.
func Parse(body []byte, contentType string) ([][]byte, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, nil
	}
	if !isNDJSON(contentType) && trimmed[0] == '[' {
		return parseArray(body)
	}
	return parseNDJSON(body)
}

func isNDJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && ndjsonTypes[mt]
}

// parseArray returns the elements of a JSON array, with their offsets
// checked so each message is the exact bytes the server sent.
func parseArray(body []byte) ([][]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // '[': Parse checked the first byte
		return nil, &ParseError{Offset: dec.InputOffset(), Err: err}
	}
	var msgs [][]byte
	for dec.More() {
		// The decoder's offset is just past the previous element; the
		// element starts after the blanks and the comma.
		prev := dec.InputOffset()
		start := prev + int64(len(body[prev:])-len(bytes.TrimLeft(body[prev:], " \t\r\n,")))
		if err := dec.Decode(&validOnly{}); err != nil {
			return nil, &ParseError{Element: len(msgs) + 1, Offset: start, Err: syntaxOnly(err)}
		}
		// The messages point into body, so they share one allocation
		// with the answer.
		msg := body[start:dec.InputOffset()]
		if !utf8.Valid(msg) {
			return nil, &ParseError{Element: len(msgs) + 1, Offset: start, Err: errNotUTF8}
		}
		msgs = append(msgs, msg)
	}
	if _, err := dec.Token(); err != nil { // ']'
		return nil, &ParseError{Offset: dec.InputOffset(), Err: syntaxOnly(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ParseError{Offset: dec.InputOffset(), Err: errAfterArray}
	}
	return msgs, nil
}

// ParseDocument returns an answer that is one message (a snapshot): the
// body trimmed of surrounding blanks, which must be a single JSON value in
// valid UTF-8, since it is forwarded as WebSocket text. It is a subslice
// of body.
func ParseDocument(body []byte) ([]byte, error) {
	doc := bytes.TrimSpace(body)
	offset := int64(len(body) - len(bytes.TrimLeft(body, " \t\r\n")))
	switch {
	case len(doc) == 0:
		return nil, &ParseError{Document: true, Offset: offset, Err: errEmptyDocument}
	case !json.Valid(doc):
		dec := json.NewDecoder(bytes.NewReader(doc))
		var v validOnly
		err := dec.Decode(&v)
		if err == nil {
			return nil, &ParseError{Document: true, Offset: offset + dec.InputOffset(), Err: errAfterDocument}
		}
		at := int64(len(doc)) // cut short: at the end
		var se *json.SyntaxError
		if errors.As(err, &se) {
			at = se.Offset
		}
		return nil, &ParseError{Document: true, Offset: offset + at, Err: syntaxOnly(err)}
	case !utf8.Valid(doc):
		return nil, &ParseError{Document: true, Offset: offset, Err: errNotUTF8}
	}
	return doc, nil
}

// validOnly is decoded into when only the decoder's validation and offsets
// are wanted: it keeps nothing, so no copy of the element is made.
type validOnly struct{}

func (*validOnly) UnmarshalJSON([]byte) error { return nil }

var (
	errNotUTF8    = errors.New("not valid UTF-8")
	errAfterArray = errors.New("data after the closing bracket")
	errAfterValue = errors.New("data after the JSON value: one message per line")
	errTruncated  = errors.New("unexpected end of answer")

	errEmptyDocument = errors.New("empty answer: want one JSON value")
	errAfterDocument = errors.New("data after the JSON value: want one")
)

// syntaxOnly turns the decoder's io.ErrUnexpectedEOF and io.EOF into an
// error that says the answer was cut short, rather than leaking I/O
// sentinels that callers might mistake for a network failure.
func syntaxOnly(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errTruncated
	}
	return err
}

// parseNDJSON returns the non-blank lines of body, each trimmed of
// surrounding whitespace (a "\r" before "\n" included).
func parseNDJSON(body []byte) ([][]byte, error) {
	var msgs [][]byte
	offset := int64(0)
	for n := 1; len(body) > 0; n++ {
		line, rest, _ := bytes.Cut(body, []byte{'\n'})
		msg := bytes.TrimSpace(line)
		if len(msg) > 0 {
			if err := checkLine(msg); err != nil {
				return nil, &ParseError{Line: n, Offset: offset, Err: err}
			}
			msgs = append(msgs, msg)
		}
		offset += int64(len(line)) + 1
		body = rest
	}
	return msgs, nil
}

// checkLine reports why one NDJSON line is not a message.
func checkLine(msg []byte) error {
	if !json.Valid(msg) {
		// Valid says no; decoding again says why.
		dec := json.NewDecoder(bytes.NewReader(msg))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return syntaxOnly(err)
		}
		return errAfterValue
	}
	if !utf8.Valid(msg) {
		return errNotUTF8
	}
	return nil
}
