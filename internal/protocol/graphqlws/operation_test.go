package graphqlws

import (
	"strings"
	"testing"
)

func TestOperation(t *testing.T) {
	cases := []struct {
		doc, name string
		want      OpType
	}{
		{`{ hello }`, "", OpQuery},
		{`query { hello }`, "", OpQuery},
		{`query Q($a: Int = 1) @live { hello(a: $a) }`, "", OpQuery},
		{`mutation { bump }`, "", OpMutation},
		{`subscription S { countdown(from: 3) }`, "", OpSubscription},
		{"# subscription\n\nmutation M { bump }", "", OpMutation},
		{`query Q($s: String = "subscription { x }") { hello }`, "", OpQuery},
		{`query Q($o: In = {a: {b: 1}}) { hello }`, "", OpQuery},
		{"query Q { a(s: \"\"\"\n mutation \\\"\"\" }\"\"\") }", "", OpQuery},
		{`fragment F on Query { hello } subscription { ...F }`, "", OpSubscription},
		{`query A { a } mutation B { b } subscription C { c }`, "B", OpMutation},
		{`query A { a } mutation B { b } subscription C { c }`, "C", OpSubscription},
		{`query A { a } mutation B { b }`, "", OpUnknown},  // ambiguous without a name
		{`query A { a } mutation B { b }`, "Z", OpUnknown}, // no such operation
		{`query A { a `, "", OpUnknown},                    // unterminated
		{`query A { a(s: "open) }`, "", OpUnknown},         // unterminated string
		{``, "", OpUnknown},
		{"\uFEFF, ,subscription{t}", "", OpSubscription},
		{`query querying { subscription }`, "querying", OpQuery},
		{`mutation($x: [Int!]! = [1, -2.5e3]) { bump }`, "", OpMutation},
	}
	for _, c := range cases {
		if got := Operation(c.doc, c.name); got != c.want {
			t.Errorf("Operation(%q, %q) = %v, want %v", c.doc, c.name, got, c.want)
		}
	}
}

// FuzzOperation: the lexer never panics and always ends; an operation it
// finds is found again with its name, and a document of which it reads a
// single operation keeps that reading when an ignored comment, a fragment
// definition or commas are added around it.
func FuzzOperation(f *testing.F) {
	for _, s := range []string{`{ hello }`, `subscription S { countdown(from: 3) }`, `mutation M { bump }`,
		`query Q($s: String = "x}") { a }`, "query { a(s: \"\"\"}\"\"\") }", `fragment F on Q { a } query { ...F }`} {
		f.Add(s, "")
	}
	f.Add(`query A { a } mutation B { b }`, "B")
	f.Fuzz(func(t *testing.T, doc, name string) {
		got := Operation(doc, name)
		if got == OpUnknown || name != "" {
			return
		}
		wrapped := "# " + strings.ReplaceAll(doc, "\n", " ") + "\n,fragment Zz on Q { a }\n" + doc + "\n,,"
		if strings.ContainsAny(doc, "\r\n") {
			wrapped = "fragment Zz on Q { a }\n" + doc + "\n,,"
		}
		if again := Operation(wrapped, ""); again != got {
			t.Fatalf("Operation(%q) = %v but %v with a comment and a fragment around it", doc, got, again)
		}
	})
}
