//go:build linux

package azurite

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sysProcAttr puts the emulator in its own process group, so Stop can signal
// everything it started and a Ctrl-C in the terminal (sent to the foreground
// group) reaches only the Go program, which then stops the emulator itself.
// It also asks the kernel to SIGKILL the emulator when the parent dies, so a
// crashed or killed test binary does not leak emulators. (Pdeathsig fires
// when the forking OS thread exits; the Go runtime does not retire ordinary
// threads, so in practice that is when the process exits.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// userHZ is the unit of utime/stime in /proc/<pid>/stat; it is fixed at 100
// for user space on Linux regardless of the kernel's internal HZ.
const userHZ = 100

// pidCPUTime reads user+system CPU time of pid from /proc/<pid>/stat.
func pidCPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("azurite: cpu time: %w", err)
	}
	// The command name (field 2) is parenthesised and may contain spaces,
	// so parse after the last ')': fields there start at field 3 (state),
	// making utime (field 14) index 11 and stime (field 15) index 12.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("azurite: cpu time: short /proc/%d/stat", pid)
	}
	var ticks int64
	for _, x := range f[11:13] {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("azurite: cpu time: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
