//go:build unix && !linux

package azurite

import (
	"errors"
	"syscall"
	"time"
)

// sysProcAttr puts the emulator in its own process group so Stop can signal
// everything it started. There is no portable parent-death signal outside
// Linux, so an emulator can outlive a test binary that is killed hard.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// cpuTime is only implemented from /proc on Linux.
func cpuTime(int) (time.Duration, error) {
	return 0, errors.New("azurite: CPUTime is only supported on Linux")
}
