package deploy

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The desktop service files of docs/desktop/: the systemd user unit,
// checked by systemd itself (systemd-analyze verify), and the launchd
// agent, parsed as a property list.

// TestSystemdUnit: systemd-analyze --user verify accepts the unit without
// a warning, in a home where %h/.local/bin/tether exists, and the unit
// says what docs/desktop.md promises.
func TestSystemdUnit(t *testing.T) {
	unit := readRepoFile(t, "docs/desktop/tether.service")
	for _, want := range []string{
		"ExecStart=%h/.local/bin/tether\n",
		"Environment=TETHER_ENV_FILE=%h/.config/tether/tether.env\n",
		"Restart=on-failure\n",
		"RestartPreventExitStatus=2\n", // a configuration error
		"KillSignal=SIGTERM\n",
		"WantedBy=default.target\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("docs/desktop/tether.service lacks %q", strings.TrimSpace(want))
		}
	}
	checkStopTimeout(t, unit)
	if out, err := verifyUnit(t, unit); err != nil || out != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The check must be able to fail: a unit with a typo is reported.
	broken := strings.Replace(unit, "RestartSec=5s", "RestartSec=five", 1) + "Bogus=1\n"
	if out, _ := verifyUnit(t, broken); !strings.Contains(out, "five") || !strings.Contains(out, "Bogus") {
		t.Errorf("systemd-analyze verify of a broken unit said %q, want both mistakes reported", out)
	}
}

// checkStopTimeout: systemd must wait for the drain (TETHER_DRAIN_TIMEOUT,
// 10 s by default, plus tether's 5 s for the last handshakes) before
// SIGKILL.
func checkStopTimeout(t *testing.T, unit string) {
	t.Helper()
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "TimeoutStopSec="); ok {
			secs, err := strconv.Atoi(strings.TrimSuffix(v, "s"))
			if err != nil || secs < 15 {
				t.Errorf("TimeoutStopSec=%s, want at least 15s", v)
			}
			return
		}
	}
	t.Error("no TimeoutStopSec: systemd's 90 s default hides a stuck drain")
}

// verifyUnit runs systemd-analyze --user verify on unit, installed as
// tether.service, with a home and runtime directory of its own, and
// returns what it printed.
func verifyUnit(t *testing.T, unit string) (string, error) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("systemd-analyze is missing and CI is set: .ci/run must install it (apt-get install systemd): %v", err)
		}
		t.Skipf("systemd-analyze is missing (install: apt-get install systemd): %v", err)
	}
	home := t.TempDir()
	bin := filepath.Join(home, ".local", "bin", "tether")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runtimeDir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tether.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "--user", "verify", path)
	cmd.Env = []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + runtimeDir, "PATH=/usr/bin:/bin", "SYSTEMD_LOG_COLOR=0"}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// plistValue is one value of a property list: its element name (dict,
// array, string, integer, true, false, ...) and content.
type plistValue struct {
	kind  string
	text  string
	dict  map[string]plistValue
	keys  []string // of a dict, in order
	array []plistValue
}

// parsePlist decodes an XML property list (Apple's PropertyList-1.0 DTD)
// strictly: one root value in <plist version="1.0">, dict keys followed
// by exactly one value, no unknown elements.
func parsePlist(r io.Reader) (plistValue, error) {
	d := xml.NewDecoder(r)
	d.Strict = true
	for {
		tok, err := d.Token()
		if err != nil {
			return plistValue{}, fmt.Errorf("no <plist>: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "plist" || attr(se, "version") != "1.0" {
				return plistValue{}, fmt.Errorf("root <%s>, want <plist version=\"1.0\">", se.Name.Local)
			}
			v, err := nextValue(d)
			if err != nil {
				return plistValue{}, err
			}
			if end, err := nextElement(d); err != nil || end != nil {
				return plistValue{}, errors.New("more than one value in <plist>")
			}
			return v, nil
		}
	}
}

func attr(se xml.StartElement, name string) string {
	for _, a := range se.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// nextElement returns the next start element, or nil at an end element.
func nextElement(d *xml.Decoder) (*xml.StartElement, error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			return &tok, nil
		case xml.EndElement:
			return nil, nil
		case xml.CharData:
			if strings.TrimSpace(string(tok)) != "" {
				return nil, fmt.Errorf("text %q between elements", tok)
			}
		}
	}
}

func nextValue(d *xml.Decoder) (plistValue, error) {
	se, err := nextElement(d)
	if err != nil {
		return plistValue{}, err
	}
	if se == nil {
		return plistValue{}, errors.New("a value is missing")
	}
	return readValue(d, *se)
}

func readValue(d *xml.Decoder, se xml.StartElement) (plistValue, error) {
	v := plistValue{kind: se.Name.Local}
	switch v.kind {
	case "string", "integer", "real", "date", "data":
		var s string
		if err := d.DecodeElement(&s, &se); err != nil {
			return v, err
		}
		v.text = s
	case "true", "false":
		if end, err := nextElement(d); err != nil || end != nil {
			return v, fmt.Errorf("<%s/> must be empty", v.kind)
		}
	case "array":
		for {
			el, err := nextElement(d)
			if err != nil {
				return v, err
			}
			if el == nil {
				return v, nil
			}
			item, err := readValue(d, *el)
			if err != nil {
				return v, err
			}
			v.array = append(v.array, item)
		}
	case "dict":
		v.dict = map[string]plistValue{}
		for {
			el, err := nextElement(d)
			if err != nil {
				return v, err
			}
			if el == nil {
				return v, nil
			}
			var key string
			if el.Name.Local != "key" {
				return v, fmt.Errorf("<%s> where a <key> was due in a dict", el.Name.Local)
			}
			if err := d.DecodeElement(&key, el); err != nil {
				return v, err
			}
			if _, dup := v.dict[key]; dup {
				return v, fmt.Errorf("key %q twice", key)
			}
			val, err := nextValue(d)
			if err != nil {
				return v, fmt.Errorf("key %q: %w", key, err)
			}
			v.dict[key], v.keys = val, append(v.keys, key)
		}
	default:
		return v, fmt.Errorf("<%s> is not a property list element", v.kind)
	}
	return v, nil
}

// launchdKeys are the launchd.plist(5) keys the agent may use: a typo in a
// key is ignored by launchd, silently.
var launchdKeys = map[string]string{
	"Label": "string", "ProgramArguments": "array", "EnvironmentVariables": "dict",
	"RunAtLoad": "bool", "KeepAlive": "dict", "ThrottleInterval": "integer", "ExitTimeOut": "integer",
	"ProcessType": "string", "StandardOutPath": "string", "StandardErrorPath": "string",
}

// TestLaunchdPlist: the agent parses as a property list, uses known
// launchd keys with the right types, is labelled as its file is named,
// runs tether with TETHER_ENV_FILE, restarts after failures only, and
// waits for the drain before SIGKILL.
func TestLaunchdPlist(t *testing.T) {
	const name = "com.tetherproxy.tether"
	root, err := parsePlist(strings.NewReader(readRepoFile(t, "docs/desktop/"+name+".plist")))
	if err != nil {
		t.Fatalf("parse the plist: %v", err)
	}
	if root.kind != "dict" {
		t.Fatalf("root value <%s>, want <dict>", root.kind)
	}
	for _, k := range root.keys {
		v := root.dict[k]
		want, known := launchdKeys[k]
		switch {
		case !known:
			t.Errorf("key %q is not one the agent should use (a typo launchd would ignore?)", k)
		case want == "bool" && v.kind != "true" && v.kind != "false", want != "bool" && v.kind != want:
			t.Errorf("key %q is <%s>, want %s", k, v.kind, want)
		}
	}
	if l := root.dict["Label"].text; l != name {
		t.Errorf("Label %q, want %q, the file's name", l, name)
	}
	if args := root.dict["ProgramArguments"].array; len(args) != 1 || !strings.HasSuffix(args[0].text, "/.local/bin/tether") {
		t.Errorf("ProgramArguments %+v, want the one tether binary", args)
	}
	env := root.dict["EnvironmentVariables"]
	if f := env.dict["TETHER_ENV_FILE"].text; !strings.HasSuffix(f, "/.config/tether/tether.env") {
		t.Errorf("TETHER_ENV_FILE %q", f)
	}
	if root.dict["RunAtLoad"].kind != "true" {
		t.Error("RunAtLoad is not true")
	}
	if ka := root.dict["KeepAlive"]; ka.dict["SuccessfulExit"].kind != "false" {
		t.Error("KeepAlive is not {SuccessfulExit: false}: restart after failures only")
	}
	if s, _ := strconv.Atoi(root.dict["ExitTimeOut"].text); s < 15 {
		t.Errorf("ExitTimeOut %q, want at least 15 s for the drain", root.dict["ExitTimeOut"].text)
	}
	// The parser must be able to fail.
	for _, bad := range []string{
		`<plist version="1.0"><dict><key>Label</key></dict></plist>`,
		`<plist version="1.0"><dict><key>Label</key><string>x</string><string>y</string></dict></plist>`,
		`<plist version="1.0"><dict><key>RunAtLoad</key><yes/></dict></plist>`,
		`<plist version="1.0"><dict><key>Label</key><string>x</dict></plist>`,
	} {
		if _, err := parsePlist(strings.NewReader(bad)); err == nil {
			t.Errorf("parsePlist accepted %s", bad)
		}
	}
}

// TestDesktopVariablesExist: every TETHER_* name in docs/desktop.md and
// docs/desktop/ is one tether reads (it refuses to start on others).
func TestDesktopVariablesExist(t *testing.T) {
	known := knownVariables(t)
	files := []string{"docs/desktop.md", "docs/desktop/tether.service", "docs/desktop/com.tetherproxy.tether.plist", "docs/desktop/tether.env"}
	seen := 0
	for _, f := range files {
		for _, name := range variableName.FindAllString(readRepoFile(t, f), -1) {
			seen++
			if !known[name] && name != "TETHER_NAME" { // the format's placeholder, TETHER_NAME=value
				t.Errorf("%s names %s, which internal/config/config.go does not define", f, name)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no TETHER_* names found in the desktop files")
	}
}
