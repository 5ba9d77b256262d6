//go:build !linux

package main

import (
	"errors"
	"os"
)

// The measurements read /proc; elsewhere the tool reports that instead of
// printing numbers it could not measure.
var errNoProc = errors.New("tether-bench measures through /proc and runs on Linux only")

const clockTicks = 100

func cpuTicks(int) (int64, error) { return 0, errNoProc }
func childPIDs(int) []int         { return nil }
func rssBytes(int) (int64, error) { return 0, errNoProc }
func raiseNoFile(uint64) error    { return errNoProc }
func hardNoFile() uint64          { return 1024 }
func terminate(p *os.Process) error {
	return p.Signal(os.Interrupt)
}
