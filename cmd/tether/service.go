package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/tetherproxy/tether/internal/config"
)

// serviceArgs is a parsed `tether service ACTION [flags]` command line.
type serviceArgs struct {
	action  string // install, uninstall or run
	envFile string // absolute; install and run
	logFile string // absolute; "" is the env file's directory's tether.log
}

const serviceUsage = `usage: tether service install --env-file PATH [--log-file PATH]
       tether service uninstall
       tether service run --env-file PATH [--log-file PATH]   (what the service manager starts)

Installs tether as a Windows service that starts with the machine and
restarts when it fails, configured by the TETHER_*=value lines of PATH
(TETHER_ENV_FILE); its log goes to --log-file, by default tether.log beside
the env file. See docs/desktop.md.`

// parseServiceArgs reads the command line after "service".
func parseServiceArgs(args []string) (serviceArgs, error) {
	if len(args) == 0 {
		return serviceArgs{}, &usageError{msg: "tether service needs an action\n" + serviceUsage}
	}
	a := serviceArgs{action: args[0]}
	switch a.action {
	case "install", "run", "uninstall":
	case "-h", "--help", "help":
		return serviceArgs{action: "help"}, nil
	default:
		return serviceArgs{}, &usageError{msg: fmt.Sprintf("tether service: unknown action %q\n%s", a.action, serviceUsage)}
	}
	rest := args[1:]
	for len(rest) > 0 {
		flag, value, hasValue := strings.Cut(rest[0], "=")
		if !hasValue && len(rest) > 1 {
			value, rest = rest[1], rest[1:]
			hasValue = true
		}
		rest = rest[1:]
		switch {
		case a.action == "uninstall":
			return serviceArgs{}, &usageError{msg: fmt.Sprintf("tether service uninstall takes no flags, got %q", flag)}
		case !hasValue || value == "":
			return serviceArgs{}, &usageError{msg: fmt.Sprintf("tether service %s: %s needs a path", a.action, flag)}
		case flag == "--env-file":
			a.envFile = value
		case flag == "--log-file":
			a.logFile = value
		default:
			return serviceArgs{}, &usageError{msg: fmt.Sprintf("tether service %s: unknown flag %q\n%s", a.action, flag, serviceUsage)}
		}
	}
	if a.action != "uninstall" && a.envFile == "" {
		return serviceArgs{}, &usageError{msg: fmt.Sprintf("tether service %s needs --env-file PATH: a service has no environment of yours to read TETHER_* variables from", a.action)}
	}
	var err error
	if a.envFile != "" {
		if a.envFile, err = filepath.Abs(a.envFile); err != nil {
			return serviceArgs{}, err
		}
	}
	if a.logFile != "" {
		if a.logFile, err = filepath.Abs(a.logFile); err != nil {
			return serviceArgs{}, err
		}
	}
	return a, nil
}

// logPath is where the service logs.
func (a serviceArgs) logPath() string {
	if a.logFile != "" {
		return a.logFile
	}
	return filepath.Join(filepath.Dir(a.envFile), "tether.log")
}

// checkServiceConfig loads the configuration the service would start
// with: only its env file, since a service has none of the user's
// variables. A mistake then shows at install, not as a service that
// stops at once.
func checkServiceConfig(envFile string) error {
	env, origins, err := config.WithEnvFile(map[string]string{config.EnvFileVar: envFile})
	if err != nil {
		return &config.Error{Err: err}
	}
	if _, err := config.Load(env); err != nil {
		config.AnnotateOrigins(err, origins)
		return err
	}
	return nil
}

// runServiceCommand runs `tether service ...`: the Windows service
// manager's part (service_windows.go), or, elsewhere, what to use instead.
func runServiceCommand(ctx context.Context, args []string, env map[string]string, stdout io.Writer) error {
	a, err := parseServiceArgs(args)
	if err != nil {
		return err
	}
	if a.action == "help" {
		fmt.Fprintln(stdout, serviceUsage)
		return nil
	}
	return platformService(ctx, a, env, stdout)
}
