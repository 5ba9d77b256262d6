// Command stormplot runs the reconnect-storm simulation of package storm for
// every default strategy in both default scenarios, prints the Markdown table
// and writes the arrivals-per-second plot (PNG) and the raw results (JSON):
//
//	go run ./internal/storm/cmd/stormplot -clients 50000 -out docs/storm.png -json docs/storm.json
//
// It is the only importer of gonum.org/v1/plot in the module, so the plotting
// library never reaches the tether binary.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tetherproxy/tether/internal/storm"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "stormplot:", err)
		os.Exit(1)
	}
}

// errUsage marks bad command-line arguments (exit code 2); the flag package
// has already printed why.
var errUsage = errors.New("usage")

// options are the command-line flags.
type options struct {
	cfg        storm.Config
	outage     time.Duration
	restart    time.Duration
	png, json  string
	xmax       time.Duration
	commandRan string
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	scenarios := []storm.Scenario{storm.LossScenario(o.outage), storm.RestartScenario(o.restart)}
	results, err := storm.RunAll(o.cfg, scenarios, storm.DefaultStrategies())
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	fmt.Fprint(stdout, storm.Table(results))
	if o.png != "" {
		if err := writePlot(o.png, o.cfg, scenarios, results, o.xmax); err != nil {
			return fmt.Errorf("write plot: %w", err)
		}
	}
	if o.json != "" {
		if err := writeJSON(o.json, o, scenarios, results); err != nil {
			return fmt.Errorf("write json: %w", err)
		}
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{cfg: storm.DefaultConfig()}
	fs := flag.NewFlagSet("stormplot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.cfg.Clients, "clients", storm.DefaultClients, "sidecars that lose their upstream together")
	capacity := fs.Int("capacity", 0, "handshakes the server completes per second (0: clients/25, i.e. 2000 for 50000)")
	fs.DurationVar(&o.outage, "outage", storm.DefaultOutage, "1006 scenario: how long the server refuses connections")
	fs.DurationVar(&o.restart, "restart", storm.DefaultRestart, "1012 scenario: how long the restarting server refuses connections")
	fs.DurationVar(&o.cfg.Policy.RestartFloor, "restart-floor", storm.TetherRestartFloor, "TETHER_RESTART_FLOOR")
	fs.DurationVar(&o.cfg.RetryAfter, "retry-after", 0, "Retry-After sent with every 503, whole seconds (0: none)")
	fs.Uint64Var(&o.cfg.Seed, "seed", storm.DefaultSeed, "random seed")
	fs.DurationVar(&o.cfg.Horizon, "horizon", storm.DefaultHorizon, "virtual time after which the simulation stops")
	fs.StringVar(&o.png, "out", "", "PNG file for the arrivals plot (empty: none)")
	fs.StringVar(&o.json, "json", "", "JSON file for the results (empty: none)")
	fs.DurationVar(&o.xmax, "xmax", 150*time.Second, "time axis length of the plot")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "stormplot: unexpected argument %q\n", fs.Arg(0))
		return o, errUsage
	}
	o.cfg.Capacity = *capacity
	if o.cfg.Capacity == 0 {
		o.cfg.Capacity = max(1, o.cfg.Clients*storm.DefaultCapacity/storm.DefaultClients)
	}
	if o.xmax <= 0 {
		fmt.Fprintf(stderr, "stormplot: -xmax must be > 0, got %v\n", o.xmax)
		return o, errUsage
	}
	o.commandRan = commandLine(args)
	return o, nil
}

// commandLine is how the JSON records the invocation that produced it.
func commandLine(args []string) string {
	s := "go run ./internal/storm/cmd/stormplot"
	for _, a := range args {
		s += " " + a
	}
	return s
}
