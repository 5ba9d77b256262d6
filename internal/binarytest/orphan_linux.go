package binarytest

import "syscall"

// killWithParent has Linux kill tether when the test binary dies (a test
// timeout's panic runs no cleanup).
func killWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
