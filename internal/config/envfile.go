package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// EnvFileVar names the file of TETHER_* lines (Config.EnvFile).
const EnvFileVar = Prefix + "ENV_FILE"

// envFileName is a variable name the file may set.
var envFileName = regexp.MustCompile(`^TETHER_[A-Z0-9_]+$`)

// envFileError is one bad line of TETHER_ENV_FILE. Its text names the file
// and the line, never the value, which may be a secret.
type envFileError struct {
	file string
	line int
	msg  string
}

func (e *envFileError) Error() string {
	return fmt.Sprintf("%s: %s line %d: %s", EnvFileVar, e.file, e.line, e.msg)
}

// origin is where a variable of the file was set, for the configuration
// report: "set in FILE line N".
type origin struct {
	file string
	line int
}

// withEnvFile returns environ with the variables of TETHER_ENV_FILE, when
// set, added under it: a variable the environment has, even empty, is not
// taken from the file. It also returns where each variable taken from the
// file was set. Every bad line is reported, joined.
//
// The file's format, for service managers where environment variables are
// awkward (docs/desktop.md): one TETHER_NAME=value a line; blank lines and
// lines starting with # are skipped; space around the name and the value is
// dropped; a value wholly in "double" or 'single' quotes loses them and is
// otherwise taken as it is: no escapes, no $expansion, no line
// continuation. A name may appear once. A UTF-8 byte order mark and CRLF
// line ends (Notepad's) are accepted.
func WithEnvFile(environ map[string]string) (map[string]string, map[string]origin, error) {
	file := environ[EnvFileVar]
	if file == "" {
		return environ, nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", EnvFileVar, err)
	}
	vars, origins, err := parseEnvFile(file, string(b))
	if err != nil {
		return nil, nil, err
	}
	merged := make(map[string]string, len(environ)+len(vars))
	for k, v := range vars {
		merged[k] = v
	}
	for k, v := range environ {
		if _, fromFile := merged[k]; fromFile {
			delete(origins, k) // the environment wins
		}
		merged[k] = v
	}
	return merged, origins, nil
}

// parseEnvFile parses the text of file (see withEnvFile).
func parseEnvFile(file, text string) (map[string]string, map[string]origin, error) {
	text = strings.TrimPrefix(text, "\uFEFF")
	vars := map[string]string{}
	origins := map[string]origin{}
	var errs []error
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, err := parseEnvLine(line)
		if err == nil {
			if first, dup := origins[name]; dup {
				err = fmt.Errorf("%s is set again (first on line %d)", name, first.line)
			}
		}
		if err != nil {
			errs = append(errs, &envFileError{file: file, line: n, msg: err.Error()})
			continue
		}
		vars[name], origins[name] = value, origin{file: file, line: n}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return vars, origins, nil
}

// parseEnvLine splits one NAME=value line and checks both.
func parseEnvLine(line string) (string, string, error) {
	name, value, ok := strings.Cut(line, "=")
	if !ok {
		return "", "", errors.New(`no "=": write TETHER_NAME=value`)
	}
	name = strings.TrimSpace(name)
	switch {
	case name == EnvFileVar:
		return "", "", fmt.Errorf("%s cannot be set in the file it names", EnvFileVar)
	case strings.HasPrefix(name, "export "):
		return "", "", fmt.Errorf("%q: write the line without export", name)
	case !envFileName.MatchString(name):
		return "", "", fmt.Errorf("%q is not a TETHER_* variable: the file sets tether's variables only%s", name, nameHint(name))
	}
	value, err := unquote(strings.TrimSpace(value))
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", name, err)
	}
	return name, value, nil
}

// nameHint is advice for a name the file may not set.
func nameHint(name string) string {
	upper := strings.ToUpper(name)
	switch {
	case upper == "HTTPS_PROXY" || upper == "HTTP_PROXY" || upper == "NO_PROXY":
		return " (set TETHER_UPSTREAM_PROXY here instead)"
	case envFileName.MatchString(upper):
		return " (names are upper case: " + upper + ")"
	}
	return ""
}

// unquote drops one pair of surrounding quotes, and refuses a value that
// opens a quote it does not close: a typo that would otherwise leave a
// quote in a URL or a token.
func unquote(v string) (string, error) {
	if v == "" || (v[0] != '"' && v[0] != '\'') {
		return v, nil
	}
	q := v[0]
	if len(v) < 2 || v[len(v)-1] != q {
		return "", fmt.Errorf("the value opens a %c quote it does not close", q)
	}
	return v[1 : len(v)-1], nil
}

// AnnotateOrigins adds to each problem of a configuration error the line
// of TETHER_ENV_FILE that set its variable.
func AnnotateOrigins(err error, origins map[string]origin) {
	var ce *Error
	if len(origins) == 0 || !errors.As(err, &ce) {
		return
	}
	for _, e := range flattenErrors(ce.Err) {
		var p *problem
		if errors.As(e, &p) {
			if o, ok := origins[p.name]; ok {
				p.msg += fmt.Sprintf(" (set in %s line %d)", o.file, o.line)
			}
		}
	}
}
