package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// idleResult is the memory that idle sessions cost a proxy process.
type idleResult struct {
	Target        string  `json:"target"`
	Sessions      int     `json:"sessions"`
	SettleSeconds float64 `json:"settle_seconds"`
	RSSBefore     int64   `json:"rss_before_bytes"` // with no session, after one opened and closed
	RSSAfter      int64   `json:"rss_after_bytes"`  // with every session open and idle
	PerSessionKiB float64 `json:"rss_per_session_kib"`
	// From tether's /metrics (Go runtime), per session: what the heap and the
	// goroutine stacks hold, as opposed to what the kernel maps.
	HeapPerSessionKiB  float64 `json:"heap_inuse_per_session_kib,omitempty"`
	StackPerSessionKiB float64 `json:"stack_inuse_per_session_kib,omitempty"`
	GoroutinesPerSess  float64 `json:"goroutines_per_session,omitempty"`
	Method             string  `json:"method"`
}

const idleMethod = "VmRSS of the proxy's processes (/proc/<pid>/status) with N app connections open " +
	"through it to a feed that sends nothing, minus VmRSS before they were opened, divided by N; " +
	"read after the settle time, on a fresh process"

// dialers is how many idle connections are opened at once.
const dialers = 32

// idleProbe is what measureIdle reads from a proxy.
type idleProbe struct {
	name    string
	url     string
	pids    func() []int
	metrics string // tether's /metrics URL, "" for others
}

// measureIdle opens n connections through the proxy to the idle feed and
// reports the resident memory they added.
func measureIdle(ctx context.Context, f *feed, p idleProbe, n int, settle time.Duration) (idleResult, error) {
	res := idleResult{Target: p.name, Sessions: n, SettleSeconds: settle.Seconds(), Method: idleMethod}
	if err := f.waitIdle(ctx, 10*time.Second); err != nil {
		return res, err
	}
	f.set(scenario{mode: modeIdle})
	// One session opened and closed first, so code paths and pools a first
	// session brings in are in the baseline, not counted per session.
	warm, err := openIdle(ctx, p.url, 1)
	closeAll(warm)
	if err != nil {
		return res, err
	}
	if err := f.waitIdle(ctx, 10*time.Second); err != nil {
		return res, err
	}
	if err := pause(ctx, settle); err != nil {
		return res, err
	}
	before, m0 := sumRSS(p.pids()), scrape(p.metrics)
	conns, err := openIdle(ctx, p.url, n)
	defer closeAll(conns)
	if err != nil {
		return res, err
	}
	if err := pause(ctx, settle); err != nil {
		return res, err
	}
	after, m1 := sumRSS(p.pids()), scrape(p.metrics)
	res.RSSBefore, res.RSSAfter = before, after
	res.PerSessionKiB = float64(after-before) / float64(n) / 1024
	if m0 != nil && m1 != nil {
		res.HeapPerSessionKiB = (m1["go_memstats_heap_inuse_bytes"] - m0["go_memstats_heap_inuse_bytes"]) / float64(n) / 1024
		res.StackPerSessionKiB = (m1["go_memstats_stack_inuse_bytes"] - m0["go_memstats_stack_inuse_bytes"]) / float64(n) / 1024
		res.GoroutinesPerSess = (m1["go_goroutines"] - m0["go_goroutines"]) / float64(n)
		if got := m1["tether_sessions"]; int(got) != n {
			return res, fmt.Errorf("tether counts %v sessions, want %d", got, n)
		}
	}
	return res, nil
}

// openIdle opens n WebSocket connections to url, dialers at a time. On error
// it returns the connections opened so far with the first error.
func openIdle(ctx context.Context, url string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	errs := make(chan error, dialers)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(dialers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				nc, _, err := dialWS(ctx, url, 16)
				if err != nil {
					errs <- err
					return
				}
				conns[i] = nc
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs
	}
	if err != nil {
		return conns, fmt.Errorf("open %d idle connections: %w", n, err)
	}
	return conns, nil
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			_ = c.Close()
		}
	}
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sumRSS(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		if b, err := rssBytes(pid); err == nil {
			total += b
		}
	}
	return total
}

// scrape reads the samples of a Prometheus text endpoint, each metric's
// labelled series summed under its bare name (tether_sessions is labelled by
// listener kind); nil when url is empty or unreachable.
func scrape(url string) map[string]float64 {
	if url == "" {
		return nil
	}
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) map[string]float64 {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		var name, val string
		if open := strings.IndexByte(line, '{'); open >= 0 {
			end := strings.LastIndexByte(line, '}')
			if end < open {
				continue
			}
			name, val = line[:open], line[end+1:]
		} else {
			var ok bool
			if name, val, ok = strings.Cut(line, " "); !ok {
				continue
			}
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			m[name] += v
		}
	}
	return m
}
