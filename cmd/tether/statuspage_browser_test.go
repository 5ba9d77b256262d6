//go:build linux

package main

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The status page as a browser shows it: headless Chromium (Debian's
// chromium, which .ci/run installs) loads the page of a running tether whose
// sessions are reconnecting, dumps the DOM it built, and takes a screenshot.

// browserWait bounds one Chromium run; a cold start on a loaded 2-core
// machine takes seconds.
const browserWait = 90 * time.Second

// screenshotWidth and screenshotHeight are the browser window's.
const screenshotWidth, screenshotHeight = 1400, 700

// chromium finds the browser; without it the test fails under CI and is
// skipped elsewhere, saying why.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const install = "apt-get install chromium"
	if os.Getenv("CI") != "" {
		t.Fatalf("chromium not found on PATH, and CI is set: CI must check the status page in a browser (%s)", install)
	}
	t.Skipf("chromium not found on PATH; the status page's browser test is skipped (%s)", install)
	return ""
}

// runChromium runs headless Chromium with args on url, in a process group
// of its own with a profile in dir, and returns its stdout. A run that
// outlives browserWait is killed, group and all: the group is this test's.
func runChromium(t *testing.T, bin, dir, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserWait)
	defer cancel()
	full := append([]string{
		"--headless", "--no-sandbox", // tests run as root, where the sandbox refuses to start
		"--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir=" + filepath.Join(dir, "profile"),
	}, args...)
	cmd := exec.CommandContext(ctx, bin, append(full, url)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// Helpers it started and left behind belong to its group: end them.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// Colours of the page's state badges (statuspage.go's style).
var (
	confirmedGreen = color.RGBA{0x1f, 0x8a, 0x4c, 0xff}
	waitingAmber   = color.RGBA{0xc7, 0x7d, 0x00, 0xff}
)

func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	s := startFlakyScene(t)
	dir := t.TempDir()
	url := s.tether.adminURL + "/"

	dom := string(runChromium(t, bin, dir, url, "--dump-dom"))
	rows := regexp.MustCompile(`<tr class="session" id="session-(\d+)" data-state="(\w+)">`).FindAllStringSubmatch(dom, -1)
	if len(rows) != 2 {
		t.Fatalf("the DOM has %d session rows, want 2:\n%s", len(rows), dom)
	}
	if rows[0][2] != "confirmed" || rows[1][2] != "waiting" {
		t.Errorf("row states %s and %s, want confirmed and waiting", rows[0][2], rows[1][2])
	}
	for _, want := range []string{`1012 "restart"`, "HTTP 503", "dial failed", "connected"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM lacks %q", want)
		}
	}

	shot := filepath.Join(dir, "status.png")
	runChromium(t, bin, dir, url, "--screenshot="+shot, "--window-size="+strconv.Itoa(screenshotWidth)+","+strconv.Itoa(screenshotHeight))
	img := decodePNG(t, shot)
	if b := img.Bounds(); b.Dx() != screenshotWidth || b.Dy() != screenshotHeight {
		t.Errorf("screenshot is %dx%d, want the window's %dx%d", b.Dx(), b.Dy(), screenshotWidth, screenshotHeight)
	}
	colours, counts := census(img, confirmedGreen, waitingAmber)
	if colours < 16 {
		t.Errorf("the screenshot has %d colours: blank, not a rendered page", colours)
	}
	// Each session row shows its state as a badge of solid colour: one
	// green (the steady session), one amber (the flaky one, waiting).
	for i, name := range []string{"confirmed green", "waiting amber"} {
		if counts[i] < 100 {
			t.Errorf("the screenshot has %d pixels of the %s badge, want a rendered badge (100 or more)", counts[i], name)
		}
	}
	if t.Failed() || os.Getenv("TETHER_KEEP_SCREENSHOT") != "" {
		keep := filepath.Join(os.TempDir(), "tether-status-page.png")
		if data, err := os.ReadFile(shot); err == nil && os.WriteFile(keep, data, 0o644) == nil {
			t.Logf("screenshot kept at %s", keep)
		}
	}
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	return img
}

// census counts the image's distinct colours and its pixels of each of
// want exactly.
func census(img image.Image, want ...color.RGBA) (distinct int, counts []int) {
	seen := map[color.RGBA]bool{}
	counts = make([]int, len(want))
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			seen[c] = true
			for i, w := range want {
				if c == w {
					counts[i]++
				}
			}
		}
	}
	return len(seen), counts
}
