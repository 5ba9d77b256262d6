//go:build unix && !linux

package interop

import "syscall"

// killWithParent does nothing: only Linux has a parent-death signal. The peer
// scripts still exit when their stdin closes.
func killWithParent(*syscall.SysProcAttr) {}
