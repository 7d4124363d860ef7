//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Span is the least time a [Gauge] measures over: the kernel counts a
// process's CPU time to the microsecond or better, so a fiftieth of a
// second tells a busy process from one that waits.
const Span = 20 * time.Millisecond

// Self is the user and system CPU time this process has used.
func Self() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
