//go:build race

package proxy_test

// raceEnabled: the tests run under the race detector, whose stacks are
// larger than a plain build's.
const raceEnabled = true
