//go:build !race

package azdispatch

// raceEnabled tells tests that the race detector is on (see race_on_test.go).
const raceEnabled = false
