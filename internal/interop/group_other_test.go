//go:build !unix

package interop

import "os/exec"

// own leaves the child in the test's process group: process groups are a
// Unix notion, and the peer scripts start no children of their own.
func own(*exec.Cmd) {}

// killGroup kills the child.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
