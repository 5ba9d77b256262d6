//go:build !windows

package main

import (
	"context"
	"io"
	"runtime"
)

// platformService says what runs tether as a service on this system:
// `tether service` drives the Windows service manager only.
func platformService(_ context.Context, _ serviceArgs, _ map[string]string, _ io.Writer) error {
	return &usageError{msg: "tether service installs a Windows service; " + serviceAdvice(runtime.GOOS)}
}

// serviceAdvice names the service manager of goos and the unit that
// docs/desktop.md gives for it.
func serviceAdvice(goos string) string {
	switch goos {
	case "darwin":
		return "on macOS run tether as a launchd agent: install docs/desktop/com.tetherproxy.tether.plist in ~/Library/LaunchAgents/ with /Users/YOU replaced by your home, then launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/com.tetherproxy.tether.plist (docs/desktop.md)"
	case "linux":
		return "on Linux run tether as a systemd user service: copy docs/desktop/tether.service to ~/.config/systemd/user/, then systemctl --user enable --now tether (docs/desktop.md)"
	}
	return "on " + goos + " run tether from your service manager with TETHER_ENV_FILE pointing at a file of TETHER_*=value lines (docs/desktop.md)"
}
