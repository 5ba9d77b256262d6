package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

var (
	// envTag matches the variable name in a Config field's `env:"NAME,…"` tag.
	envTag = regexp.MustCompile(`env:"([A-Z0-9_]+)`)
	// variableName matches a TETHER_* name in any text; "TETHER_*" and the
	// schema's ^TETHER_[A-Z0-9_]+$ pattern are not names.
	variableName = regexp.MustCompile(`\bTETHER_[A-Z0-9][A-Z0-9_]*\b`)
)

// knownVariables returns the variables tether reads, from the env tags of
// its Config (the tags omit the TETHER_ prefix that LoadConfig adds).
func knownVariables(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	for _, m := range envTag.FindAllStringSubmatch(readRepoFile(t, "internal/config/config.go"), -1) {
		known["TETHER_"+m[1]] = true
	}
	// Guard against a regexp that silently stopped matching.
	for _, name := range []string{"TETHER_UPSTREAM_URL", "TETHER_LISTEN", "TETHER_ADMIN_LISTEN", "TETHER_DRAIN_TIMEOUT"} {
		if !known[name] {
			t.Fatalf("%s not found among the env tags of internal/config/config.go (found %d names)", name, len(known))
		}
	}
	return known
}

// deployFiles returns the chart's files and the Dockerfile, by path relative
// to the repository root.
func deployFiles(t *testing.T) map[string]string {
	t.Helper()
	root := repoRoot(t)
	files := map[string]string{"Dockerfile": readRepoFile(t, "Dockerfile")}
	chart := filepath.Join(root, "helm", "tether")
	err := filepath.WalkDir(chart, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("walk %s: %v", chart, err)
	}
	return files
}

// TestChartVariablesExist fails when the chart or the Dockerfile names a
// TETHER_* variable tether does not read: tether exits with code 2 on an
// unknown TETHER_* variable, so a stale name in the chart would stop every pod.
func TestChartVariablesExist(t *testing.T) {
	known := knownVariables(t)
	seen := 0
	for path, text := range deployFiles(t) {
		for _, name := range variableName.FindAllString(text, -1) {
			seen++
			if !known[name] {
				t.Errorf("%s names %s, which internal/config/config.go does not define", path, name)
			}
		}
	}
	// The chart sets at least these; finding none means the scan is broken.
	if seen == 0 {
		t.Fatal("no TETHER_* names found in helm/tether or the Dockerfile")
	}
}

func TestVariableNamePattern(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"- name: TETHER_UPSTREAM_URL", []string{"TETHER_UPSTREAM_URL"}},
		{"TETHER_LISTEN and TETHER_ADMIN_LISTEN", []string{"TETHER_LISTEN", "TETHER_ADMIN_LISTEN"}},
		{`"pattern": "^TETHER_[A-Z0-9_]+$"`, nil},
		{"every TETHER_* variable", nil},
		{"XTETHER_LISTEN", nil},
	}
	for _, tt := range tests {
		if got := variableName.FindAllString(tt.text, -1); !slices.Equal(got, tt.want) {
			t.Errorf("names in %q = %q, want %q", tt.text, got, tt.want)
		}
	}
}
