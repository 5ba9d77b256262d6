package proxytest

import "syscall"

// killWithParent has Linux kill tinyproxy when the test binary dies (a test
// timeout's panic runs no cleanup).
func killWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
