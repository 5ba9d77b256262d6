package deploy

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The image's binary, built as the Dockerfile builds it: the builder's RUN
// is read from the Dockerfile and run with the build arguments a
// `docker build` would give it, so the test cannot drift from the image's
// flags (CGO_ENABLED, -trimpath, -ldflags).

// imageVersion is the VERSION build argument of the test build.
const imageVersion = "v0.0.0-imagetest"

// dockerBuild is the builder's go build as the Dockerfile writes it, with
// its variables expanded.
type dockerBuild struct {
	env  []string // NAME=value assignments before go
	args []string // after go: build, its flags, the package
}

// parseDockerBuild splits the builder's RUN into its leading variable
// assignments and the go command, expanding $NAME and ${NAME} from vars.
// A variable it does not know is an error: a new build argument must be
// given a value here, or the test would build something else than the
// image.
func parseDockerBuild(run string, vars map[string]string) (dockerBuild, error) {
	words, err := shellWords(run, vars)
	if err != nil {
		return dockerBuild{}, err
	}
	var b dockerBuild
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		b.env = append(b.env, words[0])
		words = words[1:]
	}
	if len(words) < 2 || words[0] != "go" || words[1] != "build" {
		return dockerBuild{}, fmt.Errorf("RUN %q: want [NAME=value…] go build …", run)
	}
	b.args = words[1:]
	return b, nil
}

var shellVar = regexp.MustCompile(`\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// shellWords splits a command line as sh does for what a Dockerfile's RUN
// holds here: words separated by blanks, double and single quotes, and
// variables expanded outside single quotes. Anything else a shell would do
// (globs, $(…), backslashes, ;, &&) is refused rather than guessed.
func shellWords(line string, vars map[string]string) ([]string, error) {
	if strings.ContainsAny(line, "`\\;&|<>*?") || strings.Contains(line, "$(") {
		return nil, fmt.Errorf("RUN %q: holds shell syntax the test does not interpret", line)
	}
	var words []string
	var cur strings.Builder
	inWord := false
	expand := func(s string) error {
		var missing []string
		cur.WriteString(shellVar.ReplaceAllStringFunc(s, func(m string) string {
			name := strings.Trim(m, "${}")
			v, ok := vars[name]
			if !ok {
				missing = append(missing, name)
			}
			return v
		}))
		if len(missing) > 0 {
			return fmt.Errorf("RUN uses $%s, which the image test gives no value", missing[0])
		}
		return nil
	}
	for rest := line; rest != ""; {
		switch c := rest[0]; {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			rest = rest[1:]
		case c == '"' || c == '\'':
			end := strings.IndexByte(rest[1:], c)
			if end < 0 {
				return nil, fmt.Errorf("RUN %q: unterminated %c", line, c)
			}
			quoted := rest[1 : 1+end]
			if c == '\'' {
				cur.WriteString(quoted)
			} else if err := expand(quoted); err != nil {
				return nil, err
			}
			inWord, rest = true, rest[2+end:]
		default:
			end := strings.IndexAny(rest, " \t\"'")
			if end < 0 {
				end = len(rest)
			}
			if err := expand(rest[:end]); err != nil {
				return nil, err
			}
			inWord, rest = true, rest[end:]
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// String is the build as a shell would read it.
func (b dockerBuild) String() string {
	words := append(slices.Clone(b.env), "go")
	for _, a := range b.args {
		if strings.ContainsAny(a, " \t") {
			a = strconv.Quote(a)
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// withOutput replaces the value of go build's -o with path.
func (b dockerBuild) withOutput(path string) (dockerBuild, error) {
	i := slices.Index(b.args, "-o")
	if i < 0 || i+1 >= len(b.args) {
		return b, fmt.Errorf("go %s: no -o", strings.Join(b.args, " "))
	}
	b.args = slices.Clone(b.args)
	b.args[i+1] = path
	return b, nil
}

// buildImageBinary builds ./cmd/tether into dir as the Dockerfile's builder
// stage does, for this machine's OS and architecture, and returns its path.
func buildImageBinary(t *testing.T, dir string) string {
	t.Helper()
	stages, err := parseDockerfile(readRepoFile(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	run := buildCommand(stages[0])
	if run == "" {
		t.Fatal("the Dockerfile's builder has no RUN with go build ./cmd/tether")
	}
	// What BuildKit sets for a build on this machine, and --build-arg VERSION.
	vars := map[string]string{"TARGETOS": runtime.GOOS, "TARGETARCH": runtime.GOARCH, "VERSION": imageVersion}
	b, err := parseDockerBuild(run, vars)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tether")
	if b, err = b.withOutput(bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", b.args...)
	cmd.Dir = repoRoot(t) // the builder's WORKDIR, after COPY . .
	cmd.Env = append(os.Environ(), b.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", b, err, out.String())
	}
	t.Logf("built as the Dockerfile does: %s", b)
	return bin
}

// checkImageBinary checks what the Dockerfile's flags promise of the binary:
// static (no interpreter, no shared libraries: the final image has no libc),
// stripped (-s -w), and without the build machine's paths (-trimpath).
func checkImageBinary(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("%s is not an ELF binary: %v", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a program interpreter: it is not static and cannot run on distroless static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q", libs)
	}
	for _, name := range []string{".symtab", ".debug_info"} {
		if f.Section(name) != nil {
			t.Errorf("the binary has a %s section: -ldflags \"-s -w\" did not take", name)
		}
	}
	text, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if root := repoRoot(t); bytes.Contains(text, []byte(root+string(filepath.Separator))) {
		t.Errorf("the binary holds the build path %s: -trimpath did not take", root)
	}
}

func TestShellWords(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "y z"}
	tests := []struct {
		line    string
		want    []string
		wantErr string
	}{
		{`go build -o /out ./cmd`, []string{"go", "build", "-o", "/out", "./cmd"}, ""},
		{`X=$A go build -ldflags "-s -w -X main.v=${B}"`, []string{"X=x", "go", "build", "-ldflags", "-s -w -X main.v=y z"}, ""},
		{`echo '$A' "$A"x`, []string{"echo", "$A", "xx"}, ""},
		{`go build $C`, nil, "$C"},
		{`go build && rm -rf /`, nil, "shell syntax"},
		{`go build "unterminated`, nil, "unterminated"},
	}
	for _, tt := range tests {
		got, err := shellWords(tt.line, vars)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("shellWords(%q) error %v, want one containing %q", tt.line, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("shellWords(%q) = %q, %v; want %q", tt.line, got, err, tt.want)
		}
	}
}

// TestDockerBuildParse reads the real Dockerfile's build and checks it
// carries the flags the image depends on, as words the build will get.
func TestDockerBuildParse(t *testing.T) {
	stages, err := parseDockerfile(readRepoFile(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseDockerBuild(buildCommand(stages[0]), map[string]string{"TARGETOS": "linux", "TARGETARCH": "arm64", "VERSION": "v9"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64"} {
		if !slices.Contains(b.env, want) {
			t.Errorf("build environment %q lacks %s", b.env, want)
		}
	}
	if i := slices.Index(b.args, "-ldflags"); i < 0 || b.args[i+1] != "-s -w -X main.version=v9" {
		t.Errorf("go %q: want -ldflags \"-s -w -X main.version=v9\" as one word", b.args)
	}
	if !slices.Contains(b.args, "-trimpath") || b.args[len(b.args)-1] != "./cmd/tether" {
		t.Errorf("go %q: want -trimpath and ./cmd/tether last", b.args)
	}
}
