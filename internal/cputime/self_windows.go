//go:build windows

package cputime

import (
	"time"

	"golang.org/x/sys/windows"
)

// Span is the least time a [Gauge] measures over: Windows counts a
// process's CPU time in clock ticks of about 15.6 ms, so a quarter of a
// second keeps a reading within about a tenth of the truth.
const Span = 250 * time.Millisecond

// Self is the user and kernel CPU time this process has used.
func Self() (time.Duration, error) {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user); err != nil {
		return 0, err
	}
	// A Filetime counts 100 ns intervals.
	ticks := func(ft windows.Filetime) int64 { return int64(ft.HighDateTime)<<32 | int64(ft.LowDateTime) }
	return time.Duration(ticks(kernel)+ticks(user)) * 100, nil
}
