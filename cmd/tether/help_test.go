package main

import (
	"errors"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Every field must be documented, or --help and the README silently lose it.
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
	if n := len(configVariables()); n != typ.NumField() {
		t.Errorf("configVariables() lists %d variables, Config has %d fields", n, typ.NumField())
	}
}

func TestWriteHelp(t *testing.T) {
	var b strings.Builder
	writeHelp(&b)
	out := b.String()
	if !strings.HasPrefix(out, "usage: tether [demo|version|--help]\n") {
		t.Errorf("help does not start with the usage line:\n%s", out)
	}
	for _, want := range []string{
		"TETHER_UPSTREAM_URL (required)",
		"TETHER_DIAL_TIMEOUT (default 10s)",
		"TETHER_OUTBOX_MAX_BYTES (default 8MiB)",
		"TETHER_CONFIRM_MATCH (unset)",
		"TETHER_PERMANENT_CODES (default 1002,1003,1007,1008,1009,1010)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, v := range configVariables() {
		if !strings.Contains(out, "  "+v.name+" (") || !strings.Contains(out, v.help) {
			t.Errorf("help lacks %s or its description", v.name)
		}
	}
}

func TestVariableTable(t *testing.T) {
	table := variableTable()
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if lines[0] != "| Variable | Default | Description |" || lines[1] != "|---|---|---|" {
		t.Errorf("table header = %q", lines[:2])
	}
	if got, want := len(lines)-2, len(configVariables()); got != want {
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

// README.md documents the variables with variableTable's exact output, so the
// README cannot drift from the code. Regenerate it by pasting variableTable().
func TestReadmeVariableTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("README.md does not exist yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	if table := variableTable(); !strings.Contains(string(readme), table) {
		t.Errorf("README.md does not contain the current variable table; replace it with:\n\n%s", table)
	}
}
