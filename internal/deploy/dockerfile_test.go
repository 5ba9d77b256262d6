package deploy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, …
	args string
}

// stage is one FROM and the instructions up to the next.
type stage struct {
	from  string // image reference
	name  string // AS name, "" when unnamed
	instr []instruction
}

// parseDockerfile splits a Dockerfile into stages. It understands what the
// checks need: comments, blank lines, backslash continuations and FROM's
// --platform flag and AS name; instructions before the first FROM other than
// ARG are an error.
func parseDockerfile(text string) ([]stage, error) {
	var stages []stage
	for _, in := range instructions(text) {
		if in.cmd == "FROM" {
			stages = append(stages, parseFrom(in.args))
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				return nil, fmt.Errorf("%s before the first FROM", in.cmd)
			}
			continue
		}
		last := &stages[len(stages)-1]
		last.instr = append(last.instr, in)
	}
	return stages, nil
}

func instructions(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

func parseFrom(args string) stage {
	var s stage
	fields := strings.Fields(args)
	fields = slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, "--") })
	if len(fields) > 0 {
		s.from = fields[0]
	}
	if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
		s.name = fields[2]
	}
	return s
}

// all returns the arguments of every instruction cmd in the stage.
func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.instr {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

var (
	distrolessNonroot = regexp.MustCompile(`^gcr\.io/distroless/static-debian\d+:nonroot@sha256:[0-9a-f]{64}$`)
	buildOutput       = regexp.MustCompile(`-o\s+(\S+)`)
	versionFlag       = regexp.MustCompile(`-X\s+main\.(\w+)=\$\{?VERSION\}?`)
	labelKey          = regexp.MustCompile(`(org\.opencontainers\.image\.[a-z]+)=`)
)

// checkDockerfile returns every broken invariant of a Dockerfile's text.
func checkDockerfile(text string) []string {
	stages, err := parseDockerfile(text)
	if err != nil {
		return []string{err.Error()}
	}
	if len(stages) < 2 {
		return []string{fmt.Sprintf("%d stage(s): want a builder and a final stage", len(stages))}
	}
	build, final := stages[0], stages[len(stages)-1]
	problems := checkBuildStage(build)
	problems = append(problems, checkFinalStage(final, build)...)
	return problems
}

func checkBuildStage(build stage) []string {
	var problems []string
	if !strings.HasPrefix(build.from, "golang:") {
		problems = append(problems, "builder is "+build.from+", want golang:…")
	}
	run := buildCommand(build)
	if run == "" {
		return append(problems, "builder has no RUN with go build ./cmd/tether")
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-s -w"} {
		if !strings.Contains(run, want) {
			problems = append(problems, "go build RUN lacks "+want)
		}
	}
	if !versionFlag.MatchString(run) {
		problems = append(problems, "go build RUN does not set main.<var>=${VERSION} with -X")
	}
	return problems
}

// buildCommand returns the builder's RUN that builds ./cmd/tether.
func buildCommand(build stage) string {
	for _, run := range build.all("RUN") {
		if strings.Contains(run, "go build") && strings.Contains(run, "./cmd/tether") {
			return run
		}
	}
	return ""
}

func checkFinalStage(final, build stage) []string {
	var problems []string
	if !distrolessNonroot.MatchString(final.from) {
		problems = append(problems, "final FROM is "+final.from+", want gcr.io/distroless/static-debianN:nonroot@sha256:…")
	}
	problems = append(problems, checkUser(final)...)
	problems = append(problems, checkEntrypoint(final, build)...)
	problems = append(problems, checkExpose(final)...)
	return append(problems, checkLabels(final)...)
}

func checkUser(final stage) []string {
	users := final.all("USER")
	if len(users) == 0 {
		return []string{"final stage has no USER"}
	}
	// The last USER wins; it must be numeric for the kubelet's runAsNonRoot
	// check, which cannot resolve names in the image.
	user := users[len(users)-1]
	if user != "65532" && user != "65532:65532" {
		return []string{"USER is " + user + ", want 65532:65532"}
	}
	return nil
}

// checkEntrypoint wants exec form ["/tether"] (so SIGTERM reaches tether, not
// a shell) and /tether to be the binary the builder produced.
func checkEntrypoint(final, build stage) []string {
	eps := final.all("ENTRYPOINT")
	if len(eps) != 1 {
		return []string{fmt.Sprintf("%d ENTRYPOINT instructions, want 1", len(eps))}
	}
	var argv []string
	if err := json.Unmarshal([]byte(eps[0]), &argv); err != nil || !slices.Equal(argv, []string{"/tether"}) {
		return []string{"ENTRYPOINT is " + eps[0] + `, want exec form ["/tether"]`}
	}
	out := buildOutput.FindStringSubmatch(buildCommand(build))
	if out == nil {
		return []string{"go build RUN has no -o output path"}
	}
	want := fmt.Sprintf("--from=%s %s /tether", build.name, out[1])
	if build.name == "" || !slices.Contains(final.all("COPY"), want) {
		return []string{"final stage does not COPY " + want}
	}
	return nil
}

func checkExpose(final stage) []string {
	var ports []string
	for _, e := range final.all("EXPOSE") {
		ports = append(ports, strings.Fields(e)...)
	}
	var problems []string
	for _, want := range []string{"8080", "9090"} {
		if !slices.Contains(ports, want) && !slices.Contains(ports, want+"/tcp") {
			problems = append(problems, "EXPOSE lacks "+want)
		}
	}
	return problems
}

func checkLabels(final stage) []string {
	var keys []string
	for _, l := range final.all("LABEL") {
		for _, m := range labelKey.FindAllStringSubmatch(l, -1) {
			keys = append(keys, m[1])
		}
	}
	var problems []string
	for _, suffix := range []string{"source", "title", "description", "licenses", "version"} {
		if !slices.Contains(keys, "org.opencontainers.image."+suffix) {
			problems = append(problems, "LABEL lacks org.opencontainers.image."+suffix)
		}
	}
	if !slices.ContainsFunc(final.all("ARG"), func(a string) bool { return strings.HasPrefix(a, "VERSION") }) {
		problems = append(problems, "final stage has no ARG VERSION for its version label")
	}
	return problems
}

func TestDockerfile(t *testing.T) {
	for _, p := range checkDockerfile(readRepoFile(t, "Dockerfile")) {
		t.Error(p)
	}
}

// TestDockerfileVersionVariable checks that the -X target exists: the linker
// ignores -X for a variable that does not, and the image would say "dev".
func TestDockerfileVersionVariable(t *testing.T) {
	stages, err := parseDockerfile(readRepoFile(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := versionFlag.FindStringSubmatch(buildCommand(stages[0]))
	if m == nil {
		t.Fatal("no -X main.<var>=${VERSION} in the build")
	}
	decl := regexp.MustCompile(`(?m)^var ` + m[1] + `\s*(string\s*)?=`)
	if !decl.MatchString(readRepoFile(t, "cmd/tether/version.go")) {
		t.Errorf("cmd/tether/version.go declares no package-level var %s for -X main.%s", m[1], m[1])
	}
}

// TestDockerfileChecksCatch breaks the real Dockerfile one way at a time and
// expects checkDockerfile to notice, so a passing TestDockerfile means
// something.
func TestDockerfileChecksCatch(t *testing.T) {
	text := readRepoFile(t, "Dockerfile")
	tests := []struct {
		name, old, new, want string
	}{
		{"cgo on", "CGO_ENABLED=0 GOOS", "CGO_ENABLED=1 GOOS", "lacks CGO_ENABLED=0"},
		{"no trimpath", "build -trimpath", "build", "lacks -trimpath"},
		{"not stripped", `"-s -w `, `"`, "lacks -s -w"},
		{"no version", "-X main.version=${VERSION}", "", "does not set main"},
		{"other package", "./cmd/tether\n", "./cmd/other\n", "no RUN with go build"},
		{"tag only", "nonroot@sha256:", "nonroot-sha256-", "final FROM"},
		{"root", "USER 65532:65532", "USER 0", "USER is 0"},
		{"named user", "USER 65532:65532", "USER nonroot:nonroot", "USER is nonroot"},
		{"shell form", `ENTRYPOINT ["/tether"]`, "ENTRYPOINT /tether", "exec form"},
		{"other binary", "/out/tether /tether", "/out/tether /bin/tether", "does not COPY"},
		{"no admin port", "EXPOSE 8080 9090", "EXPOSE 8080", "EXPOSE lacks 9090"},
		{"no licenses", "org.opencontainers.image.licenses=", "org.example.licenses=", "image.licenses"},
		{"run before from", "FROM --platform=$BUILDPLATFORM golang", "RUN true\n#", "before the first FROM"},
		{"one stage", "FROM gcr.io/distroless", "# FROM gcr.io/distroless", "1 stage(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(text, tt.old) {
				t.Fatalf("the Dockerfile no longer contains %q; update this case", tt.old)
			}
			problems := checkDockerfile(strings.Replace(text, tt.old, tt.new, 1))
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("after replacing %q with %q: problems %q, want one containing %q", tt.old, tt.new, problems, tt.want)
			}
		})
	}
}

// TestDockerignore checks the build context is an allowlist that still holds
// what the build needs.
func TestDockerignore(t *testing.T) {
	var patterns []string
	for _, line := range strings.Split(readRepoFile(t, ".dockerignore"), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	if len(patterns) == 0 || patterns[0] != "*" {
		t.Errorf("first pattern is not *: the context would not be an allowlist (patterns %q)", patterns)
	}
	for _, want := range []string{"!go.mod", "!go.sum", "!**/*.go"} {
		if !slices.Contains(patterns, want) {
			t.Errorf(".dockerignore lacks %s, which the build needs", want)
		}
	}
}
