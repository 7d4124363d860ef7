//go:build unix && !linux

package azurite

import (
	"errors"
	"syscall"
	"time"
)

// sysProcAttr puts the emulator in its own process group so Stop can signal
// everything it started and a Ctrl-C in the terminal reaches only the Go
// program. There is no parent-death signal outside Linux (macOS and the BSDs
// have no Pdeathsig), so an emulator can outlive a test binary that is
// killed hard; Stop, Kill and a normal exit through them are unaffected.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// pidCPUTime is not implemented here: macOS has no /proc, and its call for
// another process's CPU time (proc_pid_rusage in libproc) is not exposed by
// golang.org/x/sys/unix; getrusage covers only reaped children.
func pidCPUTime(int) (time.Duration, error) {
	return 0, errors.New("azurite: CPUTime is only supported on Linux and Windows")
}
