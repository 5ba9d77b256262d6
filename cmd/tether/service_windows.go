//go:build windows

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tetherproxy/tether/internal/config"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/mgr"
)

// serviceName is the Windows service's name (sc.exe query tether).
const serviceName = "tether"

// serviceStopWait bounds uninstall's wait for a running service to stop:
// a drain takes TETHER_DRAIN_TIMEOUT plus shutdownGrace, 15 s by default.
const serviceStopWait = 60 * time.Second

// serviceStopHint is what the service manager is told a stop may take.
const serviceStopHint = 30 * time.Second

func platformService(ctx context.Context, a serviceArgs, env map[string]string, stdout io.Writer) error {
	switch a.action {
	case "install":
		return installService(a, stdout)
	case "uninstall":
		return uninstallService(stdout)
	}
	return runAsService(ctx, a, env)
}

// installService registers tether with the service manager: automatic
// (delayed) start, restarts after failures, the env file and log file on
// its command line, then starts it. It needs an elevated prompt.
func installService(a serviceArgs, stdout io.Writer) error {
	if err := checkServiceConfig(a.envFile); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find tether.exe: %w", err)
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return err
	}
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service manager (run from an administrator prompt): %w", err)
	}
	defer m.Disconnect()
	if s, err := m.OpenService(serviceName); err == nil {
		s.Close()
		return fmt.Errorf("service %q is installed already: run tether service uninstall first", serviceName)
	}
	args := []string{"service", "run", "--env-file", a.envFile, "--log-file", a.logPath()}
	s, err := m.CreateService(serviceName, exe, mgr.Config{
		DisplayName:      "tether",
		Description:      "Keeps a resilient upstream WebSocket or SSE connection for local apps (TETHER_ENV_FILE " + a.envFile + ")",
		StartType:        mgr.StartAutomatic,
		DelayedAutoStart: true,
	}, args...)
	if err != nil {
		return fmt.Errorf("create the service: %w", err)
	}
	defer s.Close()
	restart := []mgr.RecoveryAction{
		{Type: mgr.ServiceRestart, Delay: 5 * time.Second},
		{Type: mgr.ServiceRestart, Delay: 30 * time.Second},
		{Type: mgr.ServiceRestart, Delay: 2 * time.Minute},
	}
	if err := s.SetRecoveryActions(restart, uint32((24 * time.Hour).Seconds())); err != nil {
		return fmt.Errorf("set the service's restarts: %w", err)
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("service installed, but it did not start (see %s): %w", a.logPath(), err)
	}
	fmt.Fprintf(stdout, "installed and started the service %q: %s %v\nlog: %s\n", serviceName, exe, args, a.logPath())
	return nil
}

// uninstallService stops the service, waiting for its drain, and removes it.
func uninstallService(stdout io.Writer) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service manager (run from an administrator prompt): %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(serviceName)
	if err != nil {
		return fmt.Errorf("service %q is not installed: %w", serviceName, err)
	}
	defer s.Close()
	if err := stopService(s); err != nil {
		return err
	}
	if err := s.Delete(); err != nil {
		return fmt.Errorf("delete the service: %w", err)
	}
	fmt.Fprintf(stdout, "stopped and removed the service %q\n", serviceName)
	return nil
}

// stopService asks a running service to stop and waits until it has.
func stopService(s *mgr.Service) error {
	st, err := s.Query()
	if err != nil {
		return fmt.Errorf("query the service: %w", err)
	}
	if st.State == svc.Stopped {
		return nil
	}
	if _, err := s.Control(svc.Stop); err != nil && !errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
		return fmt.Errorf("stop the service: %w", err)
	}
	deadline := time.NewTimer(serviceStopWait)
	defer deadline.Stop()
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-deadline.C:
			return fmt.Errorf("the service did not stop within %v", serviceStopWait)
		case <-poll.C:
		}
		if st, err = s.Query(); err != nil {
			return fmt.Errorf("query the service: %w", err)
		}
		if st.State == svc.Stopped {
			return nil
		}
	}
}

// runAsService is what the service manager starts: tether configured by
// the env file, logging to the log file, stopped by the manager.
func runAsService(ctx context.Context, a serviceArgs, env map[string]string) error {
	isService, err := svc.IsWindowsService()
	if err != nil {
		return err
	}
	if !isService {
		return &usageError{msg: "tether service run is started by the Windows service manager; in a console run tether, with TETHER_ENV_FILE set if you like"}
	}
	log, err := os.OpenFile(a.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	runEnv := make(map[string]string, len(env)+1)
	for k, v := range env {
		runEnv[k] = v
	}
	runEnv[config.EnvFileVar] = a.envFile
	return svc.Run(serviceName, &windowsService{ctx: ctx, env: runEnv, log: log})
}

// windowsService runs the sidecar under the service manager.
type windowsService struct {
	ctx context.Context
	env map[string]string
	log io.Writer
}

// Execute reports the service running, runs the sidecar until the manager
// asks it to stop (or the machine shuts down), drains it, and reports how
// it ended: a failure exits with tether's exit code, so the manager's
// restarts apply.
func (s *windowsService) Execute(_ []string, r <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runSidecar(ctx, s.env, s.log) }()
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case err := <-done:
			return s.ended(err)
		case c := <-r:
			switch c.Cmd {
			case svc.Interrogate:
				status <- c.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending, WaitHint: uint32(serviceStopHint.Milliseconds())}
				cancel()
				return s.ended(<-done)
			}
		}
	}
}

func (s *windowsService) ended(err error) (bool, uint32) {
	if code := exitCode(err, s.log); code != 0 {
		return true, uint32(code)
	}
	return false, 0
}
