package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun renders a small simulation and checks each output: the Markdown
// table, a PNG of the documented size, and JSON whose rows match the table.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	pngPath, jsonPath := filepath.Join(dir, "storm.png"), filepath.Join(dir, "storm.json")
	var stdout, stderr bytes.Buffer
	args := []string{"-clients", "500", "-out", pngPath, "-json", jsonPath}
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if rows := strings.Count(stdout.String(), "\n| 10"); rows != 10 {
		t.Errorf("table has %d result rows, want 10:\n%s", rows, stdout.String())
	}

	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", pngPath, err)
	}
	wantW := int(plotWidth.Dots(plotDPI))
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() <= b.Dx()/2 {
		t.Errorf("image %v, want %d px wide with one panel per scenario", b, wantW)
	}

	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Config  jsonConfig   `json:"config"`
		Results []jsonResult `json:"results"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s is not JSON: %v", jsonPath, err)
	}
	if doc.Config.Clients != 500 || doc.Config.CapacityPerS != 20 || len(doc.Config.Scenarios) != 2 {
		t.Errorf("config %+v, want 500 clients, the proportional capacity 20/s and 2 scenarios", doc.Config)
	}
	if len(doc.Results) != 10 {
		t.Fatalf("%d results, want 10", len(doc.Results))
	}
	for _, r := range doc.Results {
		if r.AllConnectedS == nil || r.Connected != 500 || len(r.Arrivals) == 0 || len(r.Arrivals) != len(r.Accepted) {
			t.Errorf("result %s / %s incomplete: %+v", r.Scenario, r.Strategy, r)
		}
	}
}

// TestRunUsage: bad arguments are usage errors (exit code 2), reported on
// stderr, and nothing is simulated.
func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-clients", "many"},
		{"-xmax", "0s"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); !errors.Is(err, errUsage) || stderr.Len() == 0 || stdout.Len() != 0 {
			t.Errorf("run(%q) = %v, stderr %q, stdout %q; want a usage error on stderr only", args, err, stderr.String(), stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-clients", "0"}, &stdout, &stderr); err == nil || errors.Is(err, errUsage) {
		t.Errorf("run(-clients 0) = %v, want the simulation's validation error", err)
	}
}
