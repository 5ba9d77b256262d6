package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestProcStat(t *testing.T) {
	pid := os.Getpid()
	before, err := cpuTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Burn about 50 ms of CPU: 5 ticks at USER_HZ=100.
	for end, x := len(t.Name())*1e7, 0; x < end; x++ {
		_ = x * x
	}
	after, err := cpuTicks(pid)
	if err != nil || after <= before {
		t.Fatalf("cpu ticks %d then %d (%v): CPU time did not advance", before, after, err)
	}
	rss, err := rssBytes(pid)
	if err != nil || rss < 1<<20 {
		t.Fatalf("rss %d, %v", rss, err)
	}
	if ppid, err := parentPID(pid); err != nil || ppid != os.Getppid() {
		t.Fatalf("parentPID = %d, %v; want %d", ppid, err, os.Getppid())
	}
}

func TestStatFieldsOddCommand(t *testing.T) {
	// A command name may hold spaces and parentheses.
	line := "42 (a) b) (c) S 1 42 42 0 -1 4194560 100 0 0 0 17 4 0 0 20 0 1 0 100 0 0"
	f, err := statFields([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if string(f[14-3]) != "17" || string(f[15-3]) != "4" || string(f[4-3]) != "1" {
		t.Fatalf("fields %q", f)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_inuse_bytes 1.5e+06
tether_upstream_dials_total{result="ok"} 3
tether_sessions{listener="tcp"} 2
tether_sessions{listener="ws"} 5
`
	m := parseMetrics(strings.NewReader(text))
	if m["go_goroutines"] != 42 || m["go_memstats_heap_inuse_bytes"] != 1.5e6 || m["tether_sessions"] != 7 {
		t.Fatalf("parsed %v", m)
	}
	if _, ok := m[`tether_upstream_dials_total{result="ok"}`]; ok {
		t.Fatal("labelled samples are stored under their bare name only")
	}
}

// The idle measurement opens connections to the idle feed and reads memory;
// here against this process, which holds both ends.
func TestMeasureIdleDirect(t *testing.T) {
	f, err := startFeed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := measureIdle(ctx, f, idleProbe{name: "self", url: f.URL(), pids: selfPID}, 50, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.RSSBefore <= 0 || res.RSSAfter <= 0 || res.Sessions != 50 {
		t.Fatalf("idle result %+v", res)
	}
	if err := f.waitIdle(ctx, 5*time.Second); err != nil {
		t.Fatalf("idle connections not closed: %v", err)
	}
}
