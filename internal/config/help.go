package config

import (
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Variable describes one variable, read from Config's struct tags so that
// --help, the table in docs/configuration.md and the unknown-variable check
// never drift from what Load parses.
type Variable struct {
	Field    string // Config field name
	Name     string // full variable name, TETHER_…
	Default  string // envDefault, "" when none
	Required bool
	Help     string
}

// Variables lists Config's variables in declaration order.
func Variables() []Variable {
	t := reflect.TypeFor[Config]()
	vars := make([]Variable, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		key, opts, _ := strings.Cut(f.Tag.Get("env"), ",")
		if key == "" || key == "-" {
			continue
		}
		vars = append(vars, Variable{
			Field:    f.Name,
			Name:     Prefix + key,
			Default:  f.Tag.Get("envDefault"),
			Required: hasTagOption(opts, "required"),
			Help:     f.Tag.Get("help"),
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

// DefaultText is how --help and docs/configuration.md show a variable's default.
func (v Variable) DefaultText() string {
	switch {
	case v.Required:
		return "required"
	case v.Default == "":
		return "unset"
	default:
		return v.Default
	}
}

// WriteVariables prints every variable with its default and description,
// then what their values look like: the body of tether --help.
func WriteVariables(w io.Writer) {
	var b strings.Builder
	for _, v := range Variables() {
		def := v.DefaultText()
		if v.Default != "" {
			def = "default " + def
		}
		fmt.Fprintf(&b, "  %s (%s)\n      %s\n", v.Name, def, v.Help)
	}
	b.WriteString(syntaxHelp)
	_, _ = io.WriteString(w, b.String())
}

// syntaxHelp says what the values look like, since the variables list above
// only names them.
const syntaxHelp = `
Values: *_MATCH are JSON containment patterns ({"t":"welcome"} matches any object holding "t":"welcome")
or re: and a Go regular expression; *_PATH (TETHER_FORWARD_PATH aside, a boolean) and TETHER_SUBSCRIPTION_KEY
are gjson paths (seq, data.seq, params.0); TETHER_RESUME_MESSAGE, TETHER_GAP_NOTICE, TETHER_GAPFILL_URL and
TETHER_RESYNC_URL are Go text/templates with the functions json, query and path ({{json .Session}}); sizes are bytes with an optional
KiB, MiB or GiB suffix; durations are Go durations (500ms, 10s, 1m). In a shell, single-quote JSON values:
TETHER_CONFIRM_MATCH='{"t":"welcome"}'. Every variable is explained in docs/configuration.md.
`

// variableTable renders the variables as the Markdown table in
// docs/configuration.md.
func variableTable() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Description |\n")
	b.WriteString("|---|---|---|\n")
	for _, v := range Variables() {
		def := "`" + v.Default + "`"
		if v.Required || v.Default == "" {
			def = "*" + v.DefaultText() + "*"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, markdownCell(v.Help))
	}
	return b.String()
}

// markdownCell escapes what would break a table row.
func markdownCell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
