package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// bench holds one invocation's processes together.
type bench struct {
	cfg config
	dir string
	log io.Writer

	feed      *feed
	tether    tetherSetup
	nginxBin  string
	running   []stopper // stopped in reverse order
	rep       *report
	haveNginx bool
}

type stopper interface{ stop() error }

func (b *bench) run(ctx context.Context) (*report, error) {
	b.rep = newReport(b.cfg)
	f, err := startFeed()
	if err != nil {
		return nil, err
	}
	b.feed = f
	defer func() { _ = f.Close() }()
	defer b.stopAll()
	if err := b.prepare(ctx); err != nil {
		return nil, err
	}
	if err := b.measureRuns(ctx); err != nil {
		return nil, err
	}
	if err := b.idle(ctx); err != nil {
		return nil, err
	}
	b.rep.Checks = b.rep.checks()
	return b.rep, nil
}

// measureRuns runs the throughput and latency rounds, then stops the proxies:
// the idle measurement uses fresh processes.
func (b *bench) measureRuns(ctx context.Context) error {
	if b.cfg.rounds == 0 {
		return nil
	}
	defer b.stopAll()
	targets, err := b.startTargets(ctx)
	if err != nil {
		return err
	}
	r := &runner{feed: b.feed, duration: b.cfg.duration, warmup: b.cfg.warmup, progress: b.log}
	b.rep.Series, err = r.rounds(ctx, targets, b.cfg.scenarios(), b.cfg.rounds)
	return err
}

// prepare finds or builds the binaries.
func (b *bench) prepare(ctx context.Context) error {
	needTether := b.cfg.wants(targetTether) || b.cfg.wants(targetBaseline) || b.cfg.idleSessions > 0
	if needTether {
		bin := b.cfg.tether
		if bin == "" {
			fmt.Fprintf(b.log, "building %s\n", tetherPackage)
			var err error
			if bin, err = buildTether(ctx, b.dir); err != nil {
				return err
			}
		}
		passed, ignored := passedTetherEnv(os.Environ())
		if len(ignored) > 0 {
			b.note(fmt.Sprintf("%s from the environment ignored: the tool sets them", strings.Join(ignored, ", ")))
		}
		b.tether = tetherSetup{bin: bin, feedURL: b.feed.URL(), maxSessions: max(1024, b.cfg.idleSessions+16),
			sequencing: tetherKnows(bin, "TETHER_SEQ_PATH"), passed: passed}
		b.rep.Tether, b.rep.Seq = bin, b.tether.sequencing
		if !b.tether.sequencing {
			b.note("this tether binary has no TETHER_SEQ_PATH: measured without sequencing; " +
				"re-run with a binary that has it (it is then set to \"seq\" by default)")
		}
	}
	if !b.cfg.wants(targetNginx) && !b.cfg.wants(targetNginx64k) && b.cfg.idleSessions == 0 {
		return nil
	}
	bin, err := findNginx(b.cfg.nginx)
	switch {
	case err == nil:
		b.nginxBin, b.haveNginx = bin, true
		b.rep.Nginx = nginxVersion(bin)
	case errors.Is(err, errNotFound):
		b.note("nginx is not installed: its paths were skipped")
	default:
		return err
	}
	return nil
}

func (b *bench) note(s string) {
	fmt.Fprintln(b.log, "note:", s)
	b.rep.Notes = append(b.rep.Notes, s)
}

// startTargets starts the proxies the throughput and latency runs go through.
func (b *bench) startTargets(ctx context.Context) ([]target, error) {
	var targets []target
	for _, name := range b.cfg.targets {
		switch name {
		case targetDirect:
			targets = append(targets, target{name: name, url: b.feed.URL()})
		case targetTether, targetBaseline:
			setup := b.tether
			if name == targetBaseline {
				setup.bin = b.cfg.baseline
				setup.sequencing = tetherKnows(setup.bin, "TETHER_SEQ_PATH")
			}
			t, err := startTether(ctx, setup, b.dir, name)
			if err != nil {
				return nil, err
			}
			b.running = append(b.running, t)
			if name == targetTether {
				b.rep.Env = t.vars
			}
			targets = append(targets, target{name: name, url: t.URL(), pids: func() []int { return []int{t.pid()} }})
		}
	}
	if !b.haveNginx || !(b.cfg.wants(targetNginx) || b.cfg.wants(targetNginx64k)) {
		return targets, nil
	}
	n, err := startNginx(ctx, b.nginxBin, b.dir, "nginx", b.feed.Addr(), 1024)
	if err != nil {
		return nil, err
	}
	b.running = append(b.running, n)
	for _, name := range b.cfg.targets {
		switch name {
		case targetNginx:
			targets = append(targets, target{name: name, url: "ws://" + n.plain + "/feed", pids: n.pids})
		case targetNginx64k:
			targets = append(targets, target{name: name, url: "ws://" + n.buffered + "/feed", pids: n.pids})
		}
	}
	return targets, nil
}

// stopAll stops the running proxies; a proxy that failed to stop cleanly is
// reported as a note (its measurements were taken while it ran).
func (b *bench) stopAll() {
	for i := len(b.running) - 1; i >= 0; i-- {
		if err := b.running[i].stop(); err != nil {
			b.note(err.Error())
		}
	}
	b.running = nil
}

// idle measures resident memory per idle session on fresh processes.
func (b *bench) idle(ctx context.Context) error {
	n := b.cfg.idleSessions
	if n == 0 {
		return nil
	}
	if err := b.idleTether(ctx, targetTether, b.tether); err != nil {
		return err
	}
	if b.cfg.baseline != "" {
		setup := b.tether
		setup.bin = b.cfg.baseline
		setup.sequencing = tetherKnows(setup.bin, "TETHER_SEQ_PATH")
		if err := b.idleTether(ctx, targetBaseline, setup); err != nil {
			return err
		}
	}
	if !b.haveNginx {
		return nil
	}
	fmt.Fprintf(b.log, "idle: %d connections through a fresh nginx\n", n)
	// nginx counts both sides of each proxied connection, and a closed one
	// until it is freed: room for twice that.
	ng, err := startNginx(ctx, b.nginxBin, b.dir, "nginx-idle", b.feed.Addr(), 4*n+64)
	if err != nil {
		return err
	}
	b.running = append(b.running, ng)
	res, err := measureIdle(ctx, b.feed, idleProbe{name: targetNginx, url: "ws://" + ng.plain + "/feed", pids: ng.pids}, n, b.cfg.idleSettle)
	if err != nil {
		return fmt.Errorf("idle connections through nginx: %w", err)
	}
	b.rep.Idle = append(b.rep.Idle, res)
	b.stopAll()
	return nil
}

func (b *bench) idleTether(ctx context.Context, name string, setup tetherSetup) error {
	fmt.Fprintf(b.log, "idle: %d sessions through a fresh %s\n", b.cfg.idleSessions, name)
	t, err := startTether(ctx, setup, b.dir, name+"-idle")
	if err != nil {
		return err
	}
	b.running = append(b.running, t)
	res, err := measureIdle(ctx, b.feed, idleProbe{name: name, url: t.URL(),
		pids: func() []int { return []int{t.pid()} }, metrics: "http://" + t.admin + "/metrics"}, b.cfg.idleSessions, b.cfg.idleSettle)
	if err != nil {
		return fmt.Errorf("idle sessions through %s: %w", name, err)
	}
	b.rep.Idle = append(b.rep.Idle, res)
	b.stopAll()
	return nil
}
