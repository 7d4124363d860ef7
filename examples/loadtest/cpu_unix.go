//go:build unix

package main

import (
	"syscall"
	"time"
)

// selfCPUTime is the user and system CPU time this process has used.
func selfCPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
