//go:build unix

package azurite

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// procGroup is the emulator's process group: sysProcAttr sets Setpgid, so
// the group id equals node's pid and anything node starts is signalled with
// it.
type procGroup struct{ pid int }

// newProcGroup takes over a process started with sysProcAttr. On Unix the
// group already exists, so this cannot fail.
func newProcGroup(p *os.Process) (*procGroup, error) {
	return &procGroup{pid: p.Pid}, nil
}

// terminate sends SIGTERM (graceful) or SIGKILL to the whole group
// (negative pid). halt calls it only while node has not been seen to exit,
// so node is (but for a negligible window) not yet reaped, and its id,
// which names the group, cannot have been reused.
func (g *procGroup) terminate(graceful bool) error {
	sig := unix.SIGKILL
	if graceful {
		sig = unix.SIGTERM
	}
	return unix.Kill(-g.pid, sig)
}

// close releases nothing on Unix: a process group is not a handle.
func (g *procGroup) close() {}

// cpuTime returns node's user+system CPU time (per OS: pidCPUTime).
func (g *procGroup) cpuTime() (time.Duration, error) { return pidCPUTime(g.pid) }

// pause stops every process of the group (SIGSTOP) until resume: its
// connections stay open and its answers never come, as an account behind a
// blackholed connection looks.
func (g *procGroup) pause() error { return unix.Kill(-g.pid, unix.SIGSTOP) }

// resume lets a paused group run again (SIGCONT).
func (g *procGroup) resume() error { return unix.Kill(-g.pid, unix.SIGCONT) }
