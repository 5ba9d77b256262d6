package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// process is a subprocess under test (tether or nginx) with its output in a
// file of the temporary directory.
type process struct {
	name   string
	cmd    *exec.Cmd
	logf   string
	exited chan struct{} // closed when Wait has returned
	err    error         // Wait's result, set before exited is closed
}

// startProcess runs cmd with its output in logPath.
func startProcess(name string, cmd *exec.Cmd, logPath string) (*process, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logf: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stopTimeout bounds a graceful stop before the process is killed.
const stopTimeout = 15 * time.Second

// stop sends SIGTERM and waits, killing the process after stopTimeout.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s had exited: %v%s", p.name, p.err, p.logTail())
	default:
	}
	_ = terminate(p.cmd.Process)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s: %w%s", p.name, p.err, p.logTail())
		}
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %v of SIGTERM, killed", p.name, stopTimeout)
	}
}

// logTail returns the end of the process's output, for error messages.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.logf)
	if err != nil || len(b) == 0 {
		return ""
	}
	s := string(b[max(0, len(b)-2000):])
	return "\n--- " + p.logf + " (end) ---\n" + strings.TrimRight(s, "\n")
}

// waitListening waits until something accepts TCP connections on each address,
// failing early when the process exits.
func (p *process) waitListening(ctx context.Context, limit time.Duration, addrs ...string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for _, addr := range addrs {
		for !accepts(addr) {
			select {
			case <-tick.C:
			case <-p.exited:
				return fmt.Errorf("%s exited during start-up: %v%s", p.name, p.err, p.logTail())
			case <-deadline.C:
				return fmt.Errorf("%s not listening on %s within %v%s", p.name, addr, limit, p.logTail())
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func accepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// freeAddr returns a loopback address with a port that was free a moment ago.
// The subprocess binds it itself; another process taking it in between makes
// the start fail clearly rather than measure the wrong thing.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

var errNotFound = errors.New("not found")
