//go:build unix && !linux

package azurite

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
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

// pidCPUTime asks ps for pid's user+system CPU time. macOS has no /proc, and
// its call for another process's CPU time (proc_pid_rusage in libproc) is
// not exposed by golang.org/x/sys/unix; ps, which every Unix has, reads it.
func pidCPUTime(pid int) (time.Duration, error) {
	out, err := exec.Command("ps", "-o", "time=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0, fmt.Errorf("azurite: cpu time: ps: %w", err)
	}
	d, err := parsePSTime(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("azurite: cpu time: %w", err)
	}
	return d, nil
}
