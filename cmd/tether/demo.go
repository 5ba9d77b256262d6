package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/internal/demo"
)

// maxRandomSeed keeps generated seeds short enough to retype.
const maxRandomSeed = 1_000_000

// runDemo runs `tether demo`: a flaky feed, tether in front of it and a
// naive client, narrated on stdout; `tether demo -sse` does it with a
// Server-Sent Events feed and an EventSource-like app.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseDemoFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	opts.Out = stdout
	opts.Tether = demoTether
	return demo.Run(ctx, opts)
}

// demoTether runs tether exactly as the sidecar does, with the demo's
// TETHER_* values: the same configuration parsing and validation, the same
// proxy, upstream client and drain.
func demoTether(ctx context.Context, env map[string]string, log *zap.Logger, ready chan<- net.Addr) error {
	cfg, err := config.Load(env)
	if err != nil {
		return err
	}
	return serveProxy(ctx, cfg, log, ready)
}

// parseDemoFlags reads the demo's command line. Errors are *usageError,
// except flag.ErrHelp after -h printed the usage.
func parseDemoFlags(args []string, stderr io.Writer) (demo.Options, error) {
	fs := flag.NewFlagSet("tether demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tether demo [-sse] [-duration 30s] [-fault-every 4s] [-seed N] [-rate 20] [-v]")
		fmt.Fprintln(fs.Output(), "Runs a flaky upstream feed, tether in front of it and a naive client, and narrates what happens.")
		fmt.Fprintln(fs.Output(), "With -sse the feed is a Server-Sent Events stream and the client an EventSource-like app.")
		fs.PrintDefaults()
	}
	var opts demo.Options
	fs.DurationVar(&opts.Duration, "duration", 0, "stop once the app has the events the feed publishes in this long, and every fault in it is repaired (0: run until Ctrl-C)")
	fs.DurationVar(&opts.FaultEvery, "fault-every", demo.DefaultFaultEvery, "mean interval between faults")
	fs.Uint64Var(&opts.Seed, "seed", 0, "seed of the fault sequence (default: random, printed at start)")
	fs.IntVar(&opts.Rate, "rate", demo.DefaultRate, "feed events per second")
	fs.BoolVar(&opts.Verbose, "v", false, "also show tether's debug and unrecognised log entries")
	fs.BoolVar(&opts.SSE, "sse", false, "Server-Sent Events: an event-stream feed, tether's sse:// listener and an EventSource-like app")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return opts, err
		}
		return opts, &usageError{msg: "demo: " + err.Error()}
	}
	if fs.NArg() > 0 {
		return opts, &usageError{msg: fmt.Sprintf("demo: unexpected argument %q", fs.Arg(0))}
	}
	if !flagSet(fs, "seed") {
		opts.Seed = rand.Uint64N(maxRandomSeed) + 1
	}
	if err := validateDemoFlags(opts); err != nil {
		return opts, err
	}
	return opts, nil
}

// flagSet reports whether name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// validateDemoFlags checks values the flag package accepts but the demo
// cannot use, naming the flag.
func validateDemoFlags(o demo.Options) error {
	switch {
	case o.Duration < 0:
		return &usageError{msg: fmt.Sprintf("demo: -duration must be ≥ 0, got %s", o.Duration)}
	case o.FaultEvery < demo.MinFaultEvery:
		return &usageError{msg: fmt.Sprintf("demo: -fault-every must be ≥ %s, got %s", demo.MinFaultEvery, o.FaultEvery)}
	case o.Rate < 1 || o.Rate > demo.MaxRate:
		return &usageError{msg: fmt.Sprintf("demo: -rate must be 1 to %d, got %d", demo.MaxRate, o.Rate)}
	}
	return nil
}
