package interop

import "syscall"

// killWithParent has Linux kill the child when the test binary dies (a test
// timeout's panic runs no cleanup). The peer scripts would exit anyway when
// their stdin closes, but tether does not read stdin, and an idle tether
// writes no log line that would end it with SIGPIPE.
func killWithParent(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGKILL
}
