package graphqlws

// OpType is the kind of a GraphQL operation (GraphQL spec §2.3).
type OpType uint8

const (
	OpUnknown      OpType = iota // not found, or the document is ambiguous
	OpQuery                      // "query", or the shorthand "{ ... }"
	OpMutation                   // "mutation"
	OpSubscription               // "subscription"
)

var opTypeNames = [...]string{"unknown", "query", "mutation", "subscription"}

// String returns the operation type's keyword ("unknown" when none).
func (t OpType) String() string {
	if int(t) < len(opTypeNames) {
		return opTypeNames[t]
	}
	return "unknown"
}

// Operation returns the type of the operation that executing doc with
// operationName runs: the operation of that name, or the document's only
// operation when name is empty. OpUnknown when there is none, when name is
// empty and the document has several, or when the document cannot be read
// that far. It reads only the top level of the document (GraphQL spec
// §2.1: ignored tokens, comments, strings and block strings are skipped),
// so a selection set, an argument or a string never counts.
func Operation(doc, name string) OpType {
	lx := lexer{src: doc}
	found, n := OpUnknown, 0
	for {
		t, opName, ok := lx.definition()
		if !ok {
			break
		}
		if t == OpUnknown {
			continue // a fragment or a type-system definition
		}
		n++
		if name == "" {
			found = t
		} else if opName == name {
			return t
		}
	}
	if name == "" && n == 1 {
		return found
	}
	return OpUnknown
}

// lexer reads a GraphQL document's top-level definitions.
type lexer struct {
	src string
	pos int
}

// definition reads one definition and returns its operation type and name
// (OpUnknown for a fragment or anything else), ok false at the end of the
// document or where it cannot be read.
func (lx *lexer) definition() (t OpType, name string, ok bool) {
	tok, kind := lx.next()
	switch {
	case kind == tokEOF || kind == tokBad:
		return OpUnknown, "", false
	case kind == tokPunct && tok == "{":
		return OpQuery, "", lx.skipBlock()
	case kind != tokName:
		return OpUnknown, "", false
	}
	switch tok {
	case "query":
		t = OpQuery
	case "mutation":
		t = OpMutation
	case "subscription":
		t = OpSubscription
	}
	// The name, if any, comes right after the keyword; then variables and
	// directives, until the selection set opens at paren depth 0.
	parens := 0
	first := true
	for {
		tok, kind := lx.next()
		switch {
		case kind == tokEOF || kind == tokBad:
			return OpUnknown, "", false
		case first && kind == tokName && t != OpUnknown:
			name = tok
		case kind == tokPunct && tok == "(":
			parens++
		case kind == tokPunct && tok == ")":
			parens--
		case kind == tokPunct && tok == "{" && parens == 0:
			return t, name, lx.skipBlock()
		case kind == tokPunct && tok == "{":
			if !lx.skipBlock() { // an object value in a default
				return OpUnknown, "", false
			}
		}
		first = false
	}
}

// skipBlock skips to the "}" closing the "{" just read.
func (lx *lexer) skipBlock() bool {
	depth := 1
	for depth > 0 {
		tok, kind := lx.next()
		switch {
		case kind == tokEOF || kind == tokBad:
			return false
		case kind == tokPunct && tok == "{":
			depth++
		case kind == tokPunct && tok == "}":
			depth--
		}
	}
	return true
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokBad
	tokName
	tokPunct  // one punctuator character; "..." counts as "."
	tokString // a string or block string, or a number
)

// next returns the next token, skipping ignored tokens (§2.1.7: white
// space, line terminators, commas, comments, the byte order mark).
func (lx *lexer) next() (string, tokKind) {
	lx.skipIgnored()
	if lx.pos >= len(lx.src) {
		return "", tokEOF
	}
	start := lx.pos
	c := lx.src[lx.pos]
	switch {
	case isNameStart(c):
		for lx.pos < len(lx.src) && isNameContinue(lx.src[lx.pos]) {
			lx.pos++
		}
		return lx.src[start:lx.pos], tokName
	case c == '"':
		if !lx.skipString() {
			return "", tokBad
		}
		return "", tokString
	case c == '-' || c >= '0' && c <= '9':
		lx.pos++
		for lx.pos < len(lx.src) && (isNameContinue(lx.src[lx.pos]) || lx.src[lx.pos] == '.' || lx.src[lx.pos] == '+' || lx.src[lx.pos] == '-') {
			lx.pos++
		}
		return "", tokString
	}
	lx.pos++
	return lx.src[start:lx.pos], tokPunct
}

func (lx *lexer) skipIgnored() {
	for lx.pos < len(lx.src) {
		switch c := lx.src[lx.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			lx.pos++
		case c == '#':
			for lx.pos < len(lx.src) && lx.src[lx.pos] != '\n' && lx.src[lx.pos] != '\r' {
				lx.pos++
			}
		case c == 0xEF && len(lx.src)-lx.pos >= 3 && lx.src[lx.pos:lx.pos+3] == "\uFEFF":
			lx.pos += 3
		default:
			return
		}
	}
}

// skipString skips a string (escapes included) or a block string (§2.9.4,
// where only \""" escapes), starting at its first quote. False when it is
// not terminated.
func (lx *lexer) skipString() bool {
	if len(lx.src)-lx.pos >= 3 && lx.src[lx.pos:lx.pos+3] == `"""` {
		lx.pos += 3
		for lx.pos < len(lx.src) {
			switch {
			case len(lx.src)-lx.pos >= 4 && lx.src[lx.pos:lx.pos+4] == `\"""`:
				lx.pos += 4
			case len(lx.src)-lx.pos >= 3 && lx.src[lx.pos:lx.pos+3] == `"""`:
				lx.pos += 3
				return true
			default:
				lx.pos++
			}
		}
		return false
	}
	lx.pos++
	for lx.pos < len(lx.src) {
		switch lx.src[lx.pos] {
		case '\\':
			lx.pos += 2
		case '"':
			lx.pos++
			return true
		case '\n', '\r':
			return false // a string does not span lines
		default:
			lx.pos++
		}
	}
	return false
}

func isNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isNameContinue(c byte) bool { return isNameStart(c) || c >= '0' && c <= '9' }
