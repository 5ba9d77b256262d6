package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/config/configtest"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/internal/status"
)

// fakeCgroup writes /proc/self/cgroup and the limit files of a cgroup tree
// under a temporary directory: files maps paths under the root to contents.
func fakeCgroup(t *testing.T, self string, files map[string]string) cgroupFiles {
	t.Helper()
	dir := t.TempDir()
	cg := cgroupFiles{Self: filepath.Join(dir, "self-cgroup"), Root: filepath.Join(dir, "fs")}
	write := func(path, content string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cg.Self, self)
	for p, c := range files {
		write(filepath.Join(cg.Root, p), c)
	}
	return cg
}

// The cgroup limit is read where the process's own cgroup says, v2 or v1,
// the tightest over the cgroup and its parents; "max", v1's unlimited
// value, an unreadable file and a missing /proc/self/cgroup mean none.
func TestCgroupMemoryLimit(t *testing.T) {
	tests := []struct {
		name  string
		self  string
		files map[string]string
		want  config.ByteSize
	}{
		{"v2 own cgroup", "0::/kubepods/pod1/c1\n", map[string]string{"kubepods/pod1/c1/memory.max": "134217728\n"}, 128 * config.MiB},
		{"v2 namespace root", "0::/\n", map[string]string{"memory.max": "67108864"}, 64 * config.MiB},
		{"v2 parent tighter", "0::/a/b\n", map[string]string{"a/b/memory.max": "max", "a/memory.max": "100000000"}, 100000000},
		{"v2 unlimited", "0::/a\n", map[string]string{"a/memory.max": "max\n"}, 0},
		{"v1", "4:memory:/docker/x\n3:cpu:/docker/x\n0::/\n", map[string]string{
			"memory/docker/x/memory.limit_in_bytes": "268435456\n"}, 256 * config.MiB},
		{"v1 joint controllers", "4:cpu,memory:/x\n", map[string]string{"memory/x/memory.limit_in_bytes": "1048576"}, config.MiB},
		{"v1 unlimited", "4:memory:/x\n", map[string]string{"memory/x/memory.limit_in_bytes": "9223372036854771712"}, 0},
		{"path hidden by the namespace", "0::/../outside\n", map[string]string{"memory.max": "33554432"}, 32 * config.MiB},
		{"garbage", "0::/a\n", map[string]string{"a/memory.max": "lots"}, 0},
		{"none", "0::/a\n", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fakeCgroup(t, tt.self, tt.files).memoryLimit(); got != tt.want {
				t.Errorf("memoryLimit = %s, want %s", got, tt.want)
			}
		})
	}
	if got := (cgroupFiles{Self: filepath.Join(t.TempDir(), "absent"), Root: "/"}).memoryLimit(); got != 0 {
		t.Errorf("without /proc/self/cgroup: %s, want 0", got)
	}
}

// The plan: the variable when set, half a cgroup limit, or the fixed
// default; GOMEMLIMIT the budget plus headroom, at most 90% of the cgroup,
// and left alone when the operator set it. A derived limit below the
// shares is refused, saying where it came from.
func TestPlanMemory(t *testing.T) {
	cg := fakeCgroup(t, "0::/\n", map[string]string{"memory.max": "268435456"}) // 256MiB
	none := fakeCgroup(t, "0::/\n", nil)
	small := fakeCgroup(t, "0::/\n", map[string]string{"memory.max": "50331648"}) // 48MiB
	load := func(env map[string]string) config.Config {
		c, err := config.Load(configtest.WithURL(env))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name    string
		env     map[string]string
		cg      cgroupFiles
		goenv   map[string]string
		limit   config.ByteSize
		source  string
		goLimit config.ByteSize
	}{
		{"cgroup", nil, cg, nil, 128 * config.MiB, "cgroup", 160 * config.MiB},
		{"set", map[string]string{"TETHER_MEMORY_LIMIT": "220MiB"}, cg, nil, 220 * config.MiB, "TETHER_MEMORY_LIMIT", 241591910}, // 90% of 256MiB,
		{"default", nil, none, nil, 256 * config.MiB, "default", 288 * config.MiB},
		{"operator's GOMEMLIMIT", nil, none, map[string]string{"GOMEMLIMIT": "1GiB"}, 256 * config.MiB, "default", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planMemory(load(tt.env), tt.cg, tt.goenv)
			if err != nil {
				t.Fatal(err)
			}
			if p.Limit != tt.limit || p.Source != tt.source || p.GoLimit != tt.goLimit {
				t.Errorf("plan %+v, want limit %s from %s, GOMEMLIMIT %s", p, tt.limit, tt.source, tt.goLimit)
			}
		})
	}
	_, err := planMemory(load(nil), small, nil)
	want := "TETHER_MEMORY_LIMIT: 24MiB (unset: half the cgroup memory limit of 48MiB) is below TETHER_MAX_SESSIONS × TETHER_MEMORY_SHARE_BYTES"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("small cgroup: got %v, want %q", err, want)
	}
	if _, err := planMemory(load(map[string]string{"TETHER_MAX_SESSIONS": "512"}), small, nil); err != nil {
		t.Errorf("small cgroup, fewer sessions: %v", err)
	}
}

// /readyz stays 200 under budget pressure and says so; /status carries the
// budget.
func TestReadyzShowsMemoryPressure(t *testing.T) {
	b, err := budget.New(budget.Options{Limit: 1000, Share: 100, Sessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	a := newAdminServer("127.0.0.1:0", adminHandlers{Pressure: func() string { return status.MemoryOf(b).Pressure() }}, zap.NewNop())
	addr, err := a.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	base := "http://" + addr.String()
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || body != "ready" {
		t.Errorf("/readyz without pressure = %d %q, want 200 ready", code, body)
	}
	acct := b.Open()
	acct.TryReserve(900)
	acct.Paused()
	want := "ready; memory budget full: 1 sessions paused, 900B of 1000B used"
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || body != want {
		t.Errorf("/readyz under pressure = %d %q, want 200 %q", code, body, want)
	}
	acct.Resumed()
	acct.Close()
}
