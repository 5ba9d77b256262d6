//go:build unix

package interop

import (
	"os/exec"
	"syscall"
)

// own puts the child in a process group of its own, so that killing the group
// also ends anything it started, and asks for it to be killed if the test
// binary dies first (where the system can; see orphan*.go).
func own(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	killWithParent(cmd.SysProcAttr)
}

// killGroup sends SIGKILL to the child's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
