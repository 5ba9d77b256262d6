//go:build !race

package chaos_test

// raceEnabled: the test runs under -race, and so does the tether it builds.
const raceEnabled = false
