//go:build !unix && !windows

package cputime

import (
	"errors"
	"time"
)

// Span is the least time a [Gauge] measures over.
const Span = 100 * time.Millisecond

// Self fails: this platform does not say how much CPU time a process used.
func Self() (time.Duration, error) {
	return 0, errors.New("cputime: the CPU time of this process cannot be read on this platform")
}
