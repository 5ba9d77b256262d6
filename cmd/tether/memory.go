package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/budget"
	"github.com/tetherproxy/tether/internal/config"
)

// The memory budget's defaults (docs/design.md "Memory",
// docs/configuration.md).
const (
	// defaultMemoryLimit is TETHER_MEMORY_LIMIT when it is unset and no
	// cgroup memory limit is visible.
	defaultMemoryLimit = 256 * config.MiB
	// cgroupShare is the part of a visible cgroup memory limit an unset
	// TETHER_MEMORY_LIMIT takes: the rest is for tether's own heap, the Go
	// runtime, the read buffers of messages in flight and the kernel's
	// accounting of socket buffers, which the budget does not count.
	cgroupShare = 0.5
	// runtimeHeadroom is added to the budget for GOMEMLIMIT: tether's
	// heap beyond its buffers (sessions, goroutines, read buffers).
	runtimeHeadroom = 32 * config.MiB
	// goLimitOfCgroup caps GOMEMLIMIT at this part of a visible cgroup
	// limit, so that the collector works hard before the kernel kills.
	goLimitOfCgroup = 0.9
)

// memoryPlan is the budget TETHER_MEMORY_LIMIT resolved to at start.
type memoryPlan struct {
	Limit   config.ByteSize
	Source  string          // "TETHER_MEMORY_LIMIT", "cgroup" or "default"
	Cgroup  config.ByteSize // the cgroup memory limit seen; 0: none
	GoLimit config.ByteSize // the GOMEMLIMIT to set; 0: the operator set GOMEMLIMIT
}

// planMemory resolves the budget: the variable when set, half a visible
// cgroup limit, or defaultMemoryLimit; and GOMEMLIMIT to match, unless
// environ sets it. A derived limit below the sessions' shares is refused
// as a set one is (validateMemory).
func planMemory(c config.Config, cg cgroupFiles, environ map[string]string) (memoryPlan, error) {
	p := memoryPlan{Cgroup: cg.memoryLimit()}
	switch {
	case c.MemoryLimit.Set:
		p.Limit, p.Source = c.MemoryLimit.Size, "TETHER_MEMORY_LIMIT"
	case p.Cgroup > 0:
		p.Limit, p.Source = config.ByteSize(float64(p.Cgroup)*cgroupShare), "cgroup"
		if err := c.SharesFit(p.Limit, fmt.Sprintf(" (unset: half the cgroup memory limit of %s)", p.Cgroup)); err != nil {
			return p, err
		}
	default:
		p.Limit, p.Source = defaultMemoryLimit, "default"
		if err := c.SharesFit(p.Limit, " (unset: the default without a cgroup memory limit)"); err != nil {
			return p, err
		}
	}
	if _, set := environ["GOMEMLIMIT"]; !set {
		p.GoLimit = p.Limit + runtimeHeadroom
		if p.Cgroup > 0 {
			p.GoLimit = min(p.GoLimit, config.ByteSize(float64(p.Cgroup)*goLimitOfCgroup))
		}
	}
	return p, nil
}

// newBudget builds the budget p describes for c's sessions.
func (p memoryPlan) newBudget(c config.Config) (*budget.Budget, error) {
	return budget.New(budget.Options{Limit: int64(p.Limit), Share: int64(c.MemoryShareBytes), Sessions: c.MaxSessions})
}

// apply sets GOMEMLIMIT (runtime/debug.SetMemoryLimit) and logs the plan.
func (p memoryPlan) apply(c config.Config, log *zap.Logger) {
	fields := []zap.Field{
		zap.String("limit", p.Limit.String()), zap.String("source", p.Source),
		zap.String("share", c.MemoryShareBytes.String()), zap.Int("sessions", c.MaxSessions),
	}
	if p.Cgroup > 0 {
		fields = append(fields, zap.String("cgroup_limit", p.Cgroup.String()))
	}
	if p.GoLimit > 0 {
		debug.SetMemoryLimit(int64(p.GoLimit))
		fields = append(fields, zap.String("gomemlimit", p.GoLimit.String()))
	} else {
		fields = append(fields, zap.String("gomemlimit", "set by GOMEMLIMIT"))
	}
	log.Info("memory budget", fields...)
}

// cgroupFiles locates the cgroup memory limit of the process: Self is
// /proc/self/cgroup, Root the cgroup filesystem's mount point. Tests point
// both at files of their own.
type cgroupFiles struct {
	Self string
	Root string
}

// systemCgroup is what the process sees.
var systemCgroup = cgroupFiles{Self: "/proc/self/cgroup", Root: "/sys/fs/cgroup"}

// memoryLimit returns the tightest memory limit over the process's cgroup
// and its ancestors, v2 (memory.max) or v1 (memory.limit_in_bytes), or 0
// when none is set or none can be read. Inside a container the cgroup
// namespace usually makes the container's own cgroup the root.
func (cg cgroupFiles) memoryLimit() config.ByteSize {
	v2, v1, ok := cg.paths()
	if !ok {
		return 0
	}
	var limit config.ByteSize
	tighter := func(n config.ByteSize) {
		if n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	if v2 != "" {
		for _, dir := range ancestors(filepath.Join(cg.Root, v2), cg.Root) {
			tighter(readLimit(filepath.Join(dir, "memory.max")))
		}
	}
	if v1 != "" {
		root := filepath.Join(cg.Root, "memory")
		for _, dir := range ancestors(filepath.Join(root, v1), root) {
			tighter(readLimit(filepath.Join(dir, "memory.limit_in_bytes")))
		}
	}
	return limit
}

// paths reads the process's cgroup paths: the v2 one ("0::/path") and the
// v1 memory controller's ("N:memory:/path"), "" for the one absent.
func (cg cgroupFiles) paths() (v2, v1 string, ok bool) {
	f, err := os.Open(cg.Self)
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, rest, _ := strings.Cut(sc.Text(), ":")
		ctrls, path, found := strings.Cut(rest, ":")
		switch {
		case !found:
		case id == "0" && ctrls == "":
			v2 = path
		case containsField(ctrls, "memory"):
			v1 = path
		}
	}
	return v2, v1, sc.Err() == nil
}

func containsField(list, name string) bool {
	for f := range strings.SplitSeq(list, ",") {
		if f == name {
			return true
		}
	}
	return false
}

// ancestors lists dir and its parents up to root, inclusive. A dir outside
// root (a path the namespace hides) yields root alone.
func ancestors(dir, root string) []string {
	dir, root = filepath.Clean(dir), filepath.Clean(root)
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return []string{root}
	}
	var out []string
	for {
		out = append(out, dir)
		if dir == root {
			return out
		}
		dir = filepath.Dir(dir)
	}
}

// unlimitedV1 is about where cgroup v1 writes "no limit" (the largest
// multiple of the page size below 2^63); anything this large is none.
const unlimitedV1 = 1 << 62

// readLimit reads one limit file: a number, "max" (none) or an absent file
// (0).
func readLimit(path string) config.ByteSize {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= unlimitedV1 {
		return 0
	}
	return config.ByteSize(n)
}

// budgetWatchEvery is how often watchBudget looks at the budget.
const budgetWatchEvery = time.Second

// watchBudget logs when the memory budget starts pausing sessions and when
// it stops: once per episode, where a log line per pause would be one per
// message under load (each pause is counted in tether_memory_pauses_total).
// The returned stop ends the watch and waits for it.
func watchBudget(ctx context.Context, b *budget.Budget, every time.Duration, log *zap.Logger) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		full := false
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			paused := b.Waiting()
			switch {
			case paused > 0 && !full:
				log.Warn("memory budget full: sessions holding more than their share pause their upstream reads",
					zap.Int64("paused_sessions", paused), zap.Int64("used", b.Used()), zap.Int64("limit", b.Limit()),
					zap.Uint64("pauses", b.Pauses()))
			case paused == 0 && full:
				log.Info("memory budget has room again", zap.Int64("used", b.Used()), zap.Int64("limit", b.Limit()),
					zap.Uint64("pauses", b.Pauses()))
			}
			full = paused > 0
		}
	}()
	return func() { cancel(); <-done }
}
