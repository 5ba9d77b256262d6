package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It is
// 100 on every Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const clockTicks = 100

// cpuTicks returns utime+stime of pid: CPU time in user and kernel mode, in
// clock ticks, over the life of the process (all its threads).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f, err := statFields(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	// After the command, fields are numbered from 3 (state); utime and stime
	// are fields 14 and 15 (proc(5)).
	utime, err1 := strconv.ParseInt(string(f[14-3]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[15-3]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return utime + stime, nil
}

// statFields returns the fields of /proc/<pid>/stat after the command name,
// which is in parentheses and may itself hold spaces and parentheses.
func statFields(b []byte) ([][]byte, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("no command name")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 15-3+1 {
		return nil, errors.New("too few fields")
	}
	return f, nil
}

// parentPID returns the parent of pid (field 4 of /proc/<pid>/stat).
func parentPID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f, err := statFields(b)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(f[4-3]))
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*")
	var kids []int
	for _, p := range paths {
		child, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		if ppid, err := parentPID(child); err == nil && ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids
}

// rssBytes returns the resident set size of pid (VmRSS in /proc/<pid>/status).
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("/proc/%d/status: unexpected VmRSS line %q", pid, line)
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		return kb << 10, err
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// raiseNoFile makes sure this process may open need descriptors, raising the
// soft limit up to the hard one. Go already raises the soft limit at start-up;
// this reports clearly when even the hard limit is too low.
func raiseNoFile(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("%d file descriptors needed, hard limit is %d (raise it with ulimit -Hn as root)", need, lim.Max)
	}
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("setrlimit: %w", err)
	}
	return nil
}

// hardNoFile is the hard limit on descriptors: what a child may raise its own
// soft limit to.
func hardNoFile() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	return lim.Max
}

// terminate asks a process to stop (SIGTERM).
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
