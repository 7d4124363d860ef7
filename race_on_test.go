//go:build race

package azdispatch

// raceEnabled tells tests that the race detector is on: code runs several
// times slower, so tests that move hundreds of megabytes move less.
const raceEnabled = true
