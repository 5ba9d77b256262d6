package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// kind is the JSON type a pattern node requires.
type kind uint8

const (
	kindString kind = iota
	kindNumber
	kindTrue
	kindFalse
	kindNull
	kindObject
	kindArray
)

// node is one compiled pattern value. Patterns are parsed once, at
// configuration time, so Match compares against ready values instead of
// re-reading the pattern text for every message.
type node struct {
	kind kind
	// str is the unescaped value of a string, or the text of a number.
	str string
	// num is a number's exact value; numOK is false when its exponent is
	// too large to normalize, and then str is compared instead.
	num    decimal
	numOK  bool
	fields []field // kindObject: required fields, keys unique
	elems  []node  // kindArray: every element, in order
}

type field struct {
	key string // unescaped, compared with the message's unescaped keys
	val node
}

// jsonSpace is the whitespace JSON allows between tokens (RFC 8259 §2).
const jsonSpace = " \t\n\r"

var errNotPattern = errors.New(`pattern must be a JSON object or start with "re:"`)

// compileObject parses a JSON object pattern into its required fields.
func compileObject(pattern string) ([]field, error) {
	if !strings.HasPrefix(strings.TrimLeft(pattern, jsonSpace), "{") {
		return nil, errNotPattern
	}
	if err := checkJSON(pattern); err != nil {
		return nil, err
	}
	return compileFields(gjson.Parse(pattern))
}

// checkJSON validates with encoding/json for its error messages, then with
// validJSON, which decides for messages, so a pattern is accepted exactly
// when it would count as a valid message.
func checkJSON(pattern string) error {
	var raw json.RawMessage
	err := json.Unmarshal([]byte(pattern), &raw)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Errorf("invalid JSON at offset %d: %s", syntaxOffset(se), se.Error())
	}
	if err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if !validJSON(pattern) {
		return errors.New("invalid JSON")
	}
	return nil
}

// syntaxOffset turns encoding/json's count of bytes read into the 0-based
// offset of the offending byte, which is what a user counts in the pattern.
// The count includes the bad character itself; at the end of the input there
// is no such character and the count is already the offset of the end.
func syntaxOffset(se *json.SyntaxError) int64 {
	if strings.HasPrefix(se.Error(), "invalid character") && se.Offset > 0 {
		return se.Offset - 1
	}
	return se.Offset
}

func compileFields(obj gjson.Result) ([]field, error) {
	var fields []field
	var err error
	obj.ForEach(func(k, v gjson.Result) bool {
		for _, f := range fields {
			if f.key == k.Str {
				// A message with duplicate keys counts only the first, so
				// a second one in a pattern could never be satisfied as
				// written: reject it rather than guess which was meant.
				err = fmt.Errorf("duplicate key %q", k.Str)
				return false
			}
		}
		var n node
		if n, err = compileValue(v); err != nil {
			return false
		}
		fields = append(fields, field{key: k.Str, val: n})
		return true
	})
	return fields, err
}

func compileValue(v gjson.Result) (node, error) {
	switch {
	case v.Type == gjson.String:
		return node{kind: kindString, str: v.Str}, nil
	case v.Type == gjson.Number:
		d, ok := parseDecimal(v.Raw)
		return node{kind: kindNumber, str: v.Raw, num: d, numOK: ok}, nil
	case v.Type == gjson.True:
		return node{kind: kindTrue}, nil
	case v.Type == gjson.False:
		return node{kind: kindFalse}, nil
	case v.Type == gjson.Null:
		return node{kind: kindNull}, nil
	case v.IsObject():
		fields, err := compileFields(v)
		return node{kind: kindObject, fields: fields}, err
	default:
		elems, err := compileElems(v)
		return node{kind: kindArray, elems: elems}, err
	}
}

func compileElems(arr gjson.Result) ([]node, error) {
	var elems []node
	var err error
	arr.ForEach(func(_, v gjson.Result) bool {
		var n node
		if n, err = compileValue(v); err != nil {
			return false
		}
		elems = append(elems, n)
		return true
	})
	return elems, err
}
