package main

import (
	"fmt"
	"io"
	"reflect"
	"strings"
)

// envVar describes one variable, read from Config's struct tags so that
// --help, the README table and the unknown-variable check never drift from
// what LoadConfig parses.
type envVar struct {
	field    string // Config field name
	name     string // full variable name, TETHER_…
	def      string // envDefault, "" when none
	required bool
	help     string
}

// configVariables lists Config's variables in declaration order.
func configVariables() []envVar {
	t := reflect.TypeFor[Config]()
	vars := make([]envVar, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		key, opts, _ := strings.Cut(f.Tag.Get("env"), ",")
		if key == "" || key == "-" {
			continue
		}
		vars = append(vars, envVar{
			field:    f.Name,
			name:     envPrefix + key,
			def:      f.Tag.Get("envDefault"),
			required: hasTagOption(opts, "required"),
			help:     f.Tag.Get("help"),
		})
	}
	return vars
}

func hasTagOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// defaultText is how --help and the README show a variable's default.
func (v envVar) defaultText() string {
	switch {
	case v.required:
		return "required"
	case v.def == "":
		return "unset"
	default:
		return v.def
	}
}

// writeHelp prints the usage line and every variable with its default.
func writeHelp(w io.Writer) {
	var b strings.Builder
	b.WriteString("usage: tether [demo|version|--help]\n\n")
	b.WriteString("tether keeps a resilient upstream WebSocket or Server-Sent Events connection on behalf of a local app.\n")
	b.WriteString("It is configured only through environment variables:\n\n")
	for _, v := range configVariables() {
		def := v.defaultText()
		if v.def != "" {
			def = "default " + def
		}
		fmt.Fprintf(&b, "  %s (%s)\n      %s\n", v.name, def, v.help)
	}
	b.WriteString("\nDurations are Go durations (500ms, 10s, 1m); sizes are bytes with an optional KiB, MiB or GiB suffix.\n")
	_, _ = io.WriteString(w, b.String())
}

// variableTable renders the variables as the Markdown table in README.md.
func variableTable() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Description |\n")
	b.WriteString("|---|---|---|\n")
	for _, v := range configVariables() {
		def := "`" + v.def + "`"
		if v.required || v.def == "" {
			def = "*" + v.defaultText() + "*"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.name, def, markdownCell(v.help))
	}
	return b.String()
}

// markdownCell escapes what would break a table row.
func markdownCell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
