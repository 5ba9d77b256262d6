//go:build !linux

package binarytest

import "syscall"

// killWithParent does nothing where the system cannot tie a child's life to
// its parent's; Stop, run at cleanup, ends tether.
func killWithParent(*syscall.SysProcAttr) {}
