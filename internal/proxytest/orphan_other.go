//go:build !linux

package proxytest

import "syscall"

// killWithParent does nothing where the system cannot tie a child's life to
// its parent's; Stop, run at cleanup, ends tinyproxy.
func killWithParent(*syscall.SysProcAttr) {}
