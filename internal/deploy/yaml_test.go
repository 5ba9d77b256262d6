package deploy

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The chart tests read helm's output without a YAML library (the module takes
// no dependency for a test). helm template prints the templates as rendered,
// two-space indented block YAML, so a key's children are the lines indented
// deeper than it; these helpers walk that structure. A node is the list of
// lines below a key, or of one list item.

type node []string

func indent(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

func isContent(line string) bool {
	s := strings.TrimSpace(line)
	return s != "" && !strings.HasPrefix(s, "#")
}

// documents splits helm template output into its YAML documents.
func documents(out string) []node {
	var docs []node
	for _, d := range strings.Split(out, "\n---\n") {
		if n := node(strings.Split(d, "\n")); slices.ContainsFunc(n, isContent) {
			docs = append(docs, n)
		}
	}
	return docs
}

// kind returns the first document of a kind, or nil.
func kind(docs []node, k string) node {
	for _, d := range docs {
		if v, _ := d.field("kind"); v == k {
			return d
		}
	}
	return nil
}

// base is the indentation of the node's direct children.
func (n node) base() int {
	for _, l := range n {
		if isContent(l) {
			return indent(l)
		}
	}
	return 0
}

// children returns the lines after n[i] that are indented deeper than it,
// and, below a key, the "- " items at its own indentation: toYaml writes
// lists that way (drop:\n- ALL).
func (n node) children(i int) node {
	compact := !strings.HasPrefix(strings.TrimSpace(n[i]), "- ")
	var out node
	for _, l := range n[i+1:] {
		d := indent(l)
		item := compact && d == indent(n[i]) && strings.HasPrefix(strings.TrimSpace(l), "- ")
		if isContent(l) && d <= indent(n[i]) && !item {
			break
		}
		out = append(out, l)
	}
	return out
}

// get returns the node under a direct child key, or nil when there is none.
// For a block scalar (key: | or key: |-) the node is the scalar's lines.
func (n node) get(key string) node {
	b := n.base()
	for i, l := range n {
		s := strings.TrimSpace(l)
		if indent(l) == b && (s == key+":" || strings.HasPrefix(s, key+": |")) {
			return n.children(i)
		}
	}
	return nil
}

// path follows keys down the tree.
func (n node) path(keys ...string) node {
	for _, k := range keys {
		n = n.get(k)
	}
	return n
}

// field returns the unquoted value of a direct child "key: value".
func (n node) field(key string) (string, bool) {
	b := n.base()
	for _, l := range n {
		if indent(l) != b {
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+": "); ok {
			if u, err := strconv.Unquote(v); err == nil {
				return u, true
			}
			return v, true
		}
	}
	return "", false
}

// item returns the list item whose first line is "- first", with that line
// re-indented as an ordinary key, so field and get work on the item.
func (n node) item(first string) node {
	for i, l := range n {
		if strings.TrimSpace(l) == "- "+first {
			d := indent(l)
			head := strings.Repeat(" ", d+2) + first
			return append(node{head}, n.children(i)...)
		}
	}
	return nil
}

// items returns the first lines, after "- ", of the node's direct list items.
func (n node) items() []string {
	var out []string
	b := n.base()
	for _, l := range n {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "- "); ok && indent(l) == b {
			out = append(out, s)
		}
	}
	return out
}

// container returns the container named name in the pod spec's list (initContainers or containers).
func container(spec node, list, name string) node {
	return spec.get(list).item("name: " + name)
}

// env returns a container's plain env value by variable name.
func env(c node, name string) (string, bool) {
	return c.get("env").item("name: " + name).field("value")
}

func TestNodeHelpers(t *testing.T) {
	doc := documents(`---
# Source: x
kind: Deployment
spec:
  template:
    spec:
      initContainers:
        - name: a
          restartPolicy: Always
          env:
            - name: X
              value: "1:2"
      containers:
        - name: b
          args:
            - one
            - two
          securityContext:
            capabilities:
              drop:
              - ALL
            runAsUser: 1
`)
	if len(doc) != 1 {
		t.Fatalf("%d documents, want 1", len(doc))
	}
	spec := kind(doc, "Deployment").path("spec", "template", "spec")
	a := container(spec, "initContainers", "a")
	if v, _ := a.field("restartPolicy"); v != "Always" {
		t.Errorf("restartPolicy = %q, want Always", v)
	}
	if v, _ := env(a, "X"); v != "1:2" {
		t.Errorf("X = %q, want 1:2", v)
	}
	if c := container(spec, "initContainers", "b"); c != nil {
		t.Errorf("b found among initContainers: %q", c)
	}
	if _, ok := container(spec, "containers", "b").field("restartPolicy"); ok {
		t.Error("restartPolicy of b found: fields leak between items")
	}
	b := container(spec, "containers", "b")
	if got := b.get("args").items(); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("args = %q, want [one two]", got)
	}
	sc := b.get("securityContext")
	if got := sc.path("capabilities", "drop").items(); !slices.Equal(got, []string{"ALL"}) {
		t.Errorf("compact list drop = %q, want [ALL]", got)
	}
	if v, _ := sc.field("runAsUser"); v != "1" {
		t.Errorf("runAsUser after a compact list = %q, want 1", v)
	}
}
