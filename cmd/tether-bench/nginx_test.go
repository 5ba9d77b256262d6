package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestNginxConf(t *testing.T) {
	c := nginxConf{dir: "/tmp/x", feed: "127.0.0.1:1", plain: "127.0.0.1:2", buffered: "127.0.0.1:3",
		temps: []string{"proxy_temp_path"}, connections: 100, noFile: 164}
	conf := c.render()
	for _, want := range []string{
		"worker_processes 1;", "daemon off;", "pid /tmp/x/nginx.pid;", "error_log /tmp/x/error.log",
		"worker_connections 100;", "worker_rlimit_nofile 164;", "proxy_temp_path /tmp/x/proxy;",
		"listen 127.0.0.1:2;", "listen 127.0.0.1:3;", "proxy_pass http://127.0.0.1:1;",
		"proxy_http_version 1.1;", "proxy_set_header Upgrade $http_upgrade;",
		"proxy_set_header Connection $connection_upgrade;", "proxy_read_timeout 3600s;",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("configuration lacks %q:\n%s", want, conf)
		}
	}
	// The enlarged buffers belong to the second server only.
	plain, buffered, _ := strings.Cut(conf, "listen 127.0.0.1:3;")
	if strings.Contains(plain, "proxy_buffers") || !strings.Contains(buffered, "proxy_buffer_size 64k;") ||
		!strings.Contains(buffered, "proxy_buffers 8 64k;") {
		t.Errorf("buffers in the wrong server:\n%s", conf)
	}
	if strings.Contains(conf, "user ") {
		t.Errorf("user directive without one asked for:\n%s", conf)
	}
}

// nginx accepts the configuration the tool writes, and serves a WebSocket
// feed through both of its servers. Skipped where nginx is not installed.
func TestNginxServesFeed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the proxy's CPU time is read from /proc")
	}
	bin, err := findNginx("")
	if errors.Is(err, errNotFound) {
		t.Skip("nginx is not installed")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := startFeed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := startNginx(ctx, bin, dir, "nginx", f.Addr(), 64)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.stop(); err != nil {
			t.Errorf("stop nginx: %v", err)
		}
	}()
	if out, err := exec.Command(bin, "-t", "-p", filepath.Join(dir, "nginx")+"/", "-c", filepath.Join(dir, "nginx", "nginx.conf")).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	if len(n.pids()) < 2 {
		t.Errorf("nginx processes %v, want a master and a worker", n.pids())
	}
	r := &runner{feed: f, duration: 400 * time.Millisecond, warmup: 100 * time.Millisecond, progress: io.Discard}
	for _, addr := range []string{n.plain, n.buffered} {
		res, err := r.run(ctx, target{name: "nginx", url: "ws://" + addr + "/feed", pids: n.pids}, scenario{mode: modeMax, size: 1024}, 1)
		if err != nil {
			t.Fatalf("through %s: %v", addr, err)
		}
		// CPU is read from /proc in clock ticks (10 ms): nginx can forward a
		// short run in less than one, so zero is a reading, not a fault.
		if res.Messages == 0 || res.ProxyCPU < 0 {
			t.Fatalf("through %s: %d messages, proxy CPU %v", addr, res.Messages, res.ProxyCPU)
		}
	}
	if err := f.waitIdle(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}
