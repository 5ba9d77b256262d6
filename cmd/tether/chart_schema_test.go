package main

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config"
)

// chartSchema is the Helm chart's values schema. Its tether.env properties
// must be exactly the variables Config declares, so that a misspelt name in
// tether.env fails `helm install` ("additional properties … not allowed")
// instead of crash-looping the pod with exit code 2.
const chartSchema = "../../helm/tether/values.schema.json"

// updateDocs is -update, which regenerates every generated part of the
// repository (internal/config's docs/configuration.md table too).
var updateDocs = flag.Bool("update", false, "rewrite tether.env's schema in the chart from Config's struct tags")

var updateChartSchema = flag.Bool("update-chart-schema", false,
	"rewrite the tether.env properties of helm/tether/values.schema.json from Config")

// TestChartSchemaVariables compares the schema's tether.env block with the
// one configVariables generates, and with -update-chart-schema (or -update,
// which regenerates docs/configuration.md's table too) writes it.
func TestChartSchemaVariables(t *testing.T) {
	text, err := os.ReadFile(chartSchema)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	start, end, err := envBlock(lines)
	if err != nil {
		t.Fatalf("%s: %v", chartSchema, err)
	}
	indent := lines[start][:len(lines[start])-len(strings.TrimLeft(lines[start], " "))]
	trailer := strings.TrimPrefix(strings.TrimSpace(lines[end]), "}") // "," or ""
	want := envSchema(indent, trailer)
	got := strings.Join(lines[start:end+1], "\n")
	update := *updateChartSchema || *updateDocs
	if update && got != want {
		out := strings.Join(lines[:start], "\n") + "\n" + want + "\n" + strings.Join(lines[end+1:], "\n")
		if err := os.WriteFile(chartSchema, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		got = want
	}
	if got != want {
		t.Errorf("%s: tether.env does not list the variables Config declares; regenerate with\n"+
			"  go test ./cmd/tether -run TestChartSchemaVariables -update-chart-schema\nwant:\n%s", chartSchema, want)
	}
	var schema any
	if err := json.Unmarshal(text, &schema); err != nil && !update {
		t.Errorf("%s is not JSON: %v", chartSchema, err)
	}
}

// envBlock finds the lines of tether.env's schema: from `"env": {` after
// `"tether": {` (the app's env comes later) to the brace that closes it, at
// the same indentation.
func envBlock(lines []string) (start, end int, err error) {
	start = -1
	inTether := false
	closing := ""
	for i, l := range lines {
		s := strings.TrimSpace(l)
		switch {
		case start < 0 && s == `"tether": {`:
			inTether = true
		case start < 0 && inTether && s == `"env": {`:
			start = i
			closing = strings.TrimSuffix(l, s) + "}"
		case start >= 0 && (l == closing || l == closing+","):
			return start, i, nil
		}
	}
	return 0, 0, errors.New(`no "env": { … } under "tether": { … }`)
}

// envSchema renders tether.env's schema: an object whose properties are
// the variables, each a string, integer or boolean with its --help text.
func envSchema(indent, trailer string) string {
	var b strings.Builder
	in := func(depth int, s string) { b.WriteString(indent + strings.Repeat("  ", depth) + s + "\n") }
	in(0, `"env": {`)
	in(1, `"type": "object",`)
	in(1, `"description": "any other TETHER_* variable by name, only those tether reads (generated from internal/config's Config: go test ./cmd/tether -run TestChartSchemaVariables -update-chart-schema)",`)
	in(1, `"additionalProperties": false,`)
	in(1, `"properties": {`)
	vars := config.Variables()
	for i, v := range vars {
		help, _ := json.Marshal(v.Help)
		comma := ","
		if i == len(vars)-1 {
			comma = ""
		}
		in(2, `"`+v.Name+`": {"type": ["string", "integer", "boolean"], "description": `+string(help)+`}`+comma)
	}
	in(1, "}")
	b.WriteString(indent + "}" + trailer)
	return b.String()
}
