package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0) // -h: the usage was the answer
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tether-bench:", err)
		if errors.As(err, new(*usageError)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// config is the command line.
type config struct {
	duration     time.Duration
	warmup       time.Duration
	rounds       int
	sizes        []int
	rate         int
	targets      []string
	tether       string
	baseline     string
	nginx        string
	idleSessions int
	idleSettle   time.Duration
	jsonPath     string
	keep         bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var sizes, targets string
	fs := flag.NewFlagSet("tether-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "length of each run, warm-up included")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "start of each run left out of the measurement")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; every figure is the median over rounds (0: only the idle measurement)")
	fs.StringVar(&sizes, "sizes", "64,1KiB,16KiB", "message sizes, comma-separated (B, KiB, MiB suffixes)")
	fs.IntVar(&c.rate, "rate", 10000, "messages per second of the latency runs")
	fs.StringVar(&targets, "targets", "direct,tether,nginx,nginx-64k", "paths to measure: direct, tether, nginx, nginx-64k (tether-base is added by -tether-baseline)")
	fs.StringVar(&c.tether, "tether", "", "tether binary (default: go build "+tetherPackage+")")
	fs.StringVar(&c.baseline, "tether-baseline", "", "another tether binary measured beside -tether as path tether-base, with the same variables (before/after comparisons)")
	fs.StringVar(&c.nginx, "nginx", "", "nginx binary (default: nginx on PATH or /usr/sbin/nginx; its paths are skipped when absent)")
	fs.IntVar(&c.idleSessions, "idle-sessions", 5000, "idle sessions for the memory measurement; 0 skips it")
	fs.DurationVar(&c.idleSettle, "idle-settle", 3*time.Second, "wait before reading the memory of idle sessions")
	fs.StringVar(&c.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary directory (configurations, logs)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tether-bench [flags]\n\n"+
			"Measures a sequenced feed on loopback directly, through tether and through nginx.\n"+
			"TETHER_* variables in the environment are passed to tether.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return c, &usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	var err error
	if c.sizes, err = parseSizes(sizes); err != nil {
		return c, err
	}
	if c.targets, err = parseTargets(targets); err != nil {
		return c, err
	}
	if c.baseline != "" && !c.wants(targetBaseline) {
		c.targets = append(c.targets, targetBaseline)
	}
	return c, c.validate()
}

func (c config) validate() error {
	var errs []error
	if c.duration <= c.warmup || c.warmup < 0 {
		errs = append(errs, &usageError{fmt.Sprintf("-duration %v must exceed -warmup %v", c.duration, c.warmup)})
	}
	if c.rounds < 0 {
		errs = append(errs, &usageError{"-rounds must be >= 0"})
	}
	if c.rate < 1 || c.rate > 1_000_000 {
		errs = append(errs, &usageError{"-rate must be between 1 and 1000000"})
	}
	if c.wants(targetBaseline) && c.baseline == "" {
		errs = append(errs, &usageError{"path tether-base needs -tether-baseline"})
	}
	if c.idleSessions < 0 {
		errs = append(errs, &usageError{"-idle-sessions must be >= 0"})
	}
	return errors.Join(errs...)
}

func parseSizes(s string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		for _, u := range []struct {
			suffix string
			mult   int
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"B", 1}} {
			if rest, ok := strings.CutSuffix(f, u.suffix); ok {
				f, mult = rest, u.mult
				break
			}
		}
		n, err := strconv.Atoi(f)
		if err != nil || n*mult < minMessageSize || n*mult > 16<<20 {
			return nil, &usageError{fmt.Sprintf("-sizes: %q is not a size between %d B and 16 MiB", f, minMessageSize)}
		}
		sizes = append(sizes, n*mult)
	}
	return sizes, nil
}

func parseTargets(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		known := false
		for _, t := range allTargets {
			known = known || t == f
		}
		if !known {
			return nil, &usageError{fmt.Sprintf("-targets: unknown path %q (direct, tether, tether-base, nginx, nginx-64k)", f)}
		}
		out = append(out, f)
	}
	return out, nil
}

func (c config) wants(target string) bool {
	for _, t := range c.targets {
		if t == target {
			return true
		}
	}
	return false
}

func (c config) scenarios() []scenario {
	var out []scenario
	for _, size := range c.sizes {
		out = append(out, scenario{mode: modeMax, size: size}, scenario{mode: modeRate, size: size, rate: c.rate})
	}
	return out
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// The idle measurement holds N app connections and the N upstream
	// connections the proxy opens to the feed, both in this process.
	if err := raiseNoFile(uint64(2*cfg.idleSessions + 512)); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tether-bench-")
	if err != nil {
		return err
	}
	if cfg.keep {
		fmt.Fprintf(stderr, "temporary directory: %s\n", dir)
	} else {
		defer func() { _ = os.RemoveAll(dir) }()
	}
	b := &bench{cfg: cfg, dir: dir, log: stderr}
	rep, err := b.run(ctx)
	if err != nil {
		return err
	}
	rep.print(stdout)
	if cfg.jsonPath != "" {
		return rep.writeJSON(cfg.jsonPath)
	}
	return nil
}

func newReport(cfg config) *report {
	return &report{
		Started:  time.Now().UTC(),
		Command:  strings.Join(append([]string{"tether-bench"}, os.Args[1:]...), " "),
		Machine:  machine{CPUs: runtime.NumCPU(), CPU: cpuModel(), Kernel: kernel(), GoVersion: runtime.Version()},
		Duration: cfg.duration.String(),
		Warmup:   cfg.warmup.String(),
		Rounds:   cfg.rounds,
		Rate:     cfg.rate,
	}
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
