package config

import (
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Every field must be documented, or --help and docs/configuration.md
// silently lose it.
func TestConfigFieldsHaveTags(t *testing.T) {
	typ := reflect.TypeFor[Config]()
	seen := map[string]bool{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if key == "" {
			t.Errorf("field %s has no env tag", f.Name)
		}
		if seen[key] {
			t.Errorf("field %s reuses variable %s", f.Name, key)
		}
		seen[key] = true
		help := f.Tag.Get("help")
		if help == "" || strings.ContainsAny(help, "\n|") {
			t.Errorf("field %s: help tag %q must be one line without |", f.Name, help)
		}
	}
	if n := len(Variables()); n != typ.NumField() {
		t.Errorf("Variables() lists %d variables, Config has %d fields", n, typ.NumField())
	}
}

func TestVariableTable(t *testing.T) {
	table := variableTable()
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if lines[0] != "| Variable | Default | Description |" || lines[1] != "|---|---|---|" {
		t.Errorf("table header = %q", lines[:2])
	}
	if got, want := len(lines)-2, len(Variables()); got != want {
		t.Errorf("table has %d rows, want %d", got, want)
	}
	for _, want := range []string{
		"| `TETHER_UPSTREAM_URL` | *required* | ",
		"| `TETHER_LISTEN` | `127.0.0.1:8080` | ",
		"| `TETHER_HEARTBEAT_MESSAGE` | *unset* | ",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// updateDocs rewrites the generated parts of the docs instead of checking
// them: go test ./internal/config -run TestConfigurationVariableTable -update
var updateDocs = flag.Bool("update", false, "rewrite the variable table of docs/configuration.md from Config's struct tags")

// The variable table of docs/configuration.md sits between these markers.
const (
	tableBegin = "<!-- BEGIN variable table: generated from Config's struct tags, see internal/config/help_test.go -->\n"
	tableEnd   = "<!-- END variable table -->\n"
)

const configurationDoc = "../../docs/configuration.md"

// docs/configuration.md documents the variables with variableTable's exact
// output, so the docs cannot drift from the code; -update regenerates it.
func TestConfigurationVariableTable(t *testing.T) {
	doc, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(doc), tableBegin)
	current, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/configuration.md lacks the markers %q and %q around the variable table", tableBegin, tableEnd)
	}
	table := variableTable()
	if current == table {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(configurationDoc, []byte(before+tableBegin+table+tableEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the variable table of docs/configuration.md")
		return
	}
	t.Errorf("docs/configuration.md's variable table differs from Config's struct tags; regenerate it with\n\n" +
		"  go test ./internal/config -run TestConfigurationVariableTable -update\n\n" +
		"and describe a new variable in docs/design.md and where its feature is documented")
}

// docs/design.md is the contract and lists every variable: one that is
// missing there has no promise behind it.
func TestDesignNamesEveryVariable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Variables() {
		if !strings.Contains(string(doc), "`"+v.Name+"`") {
			t.Errorf("docs/design.md does not name `%s`: say what it promises in its section and add it, with its default, to \"Variables\"", v.Name)
		}
	}
}

// Every variable appears in --help with its description.
func TestWriteVariables(t *testing.T) {
	var b strings.Builder
	WriteVariables(&b)
	out := b.String()
	for _, v := range Variables() {
		if !strings.Contains(out, "  "+v.Name+" (") || !strings.Contains(out, v.Help) {
			t.Errorf("help lacks %s or its description", v.Name)
		}
	}
}
