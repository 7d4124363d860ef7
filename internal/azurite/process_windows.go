//go:build windows

package azurite

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// sysProcAttr starts node in a new console process group. A console
// delivers Ctrl-C to every process attached to it, so without this a Ctrl-C
// would reach node as well as the Go program: a program that handles Ctrl-C
// to shut down cleanly (the load test does) would lose its emulator
// underneath it. Windows starts a process created with
// CREATE_NEW_PROCESS_GROUP with Ctrl-C ignored, so only the Go program acts
// on it, as Setpgid arranges on Unix: it stops the emulator itself, or, if
// it dies of the Ctrl-C, the job object (see newProcGroup) takes node with
// it. Ctrl-Break is not affected.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP}
}

// procGroup is a job object holding node (and anything node would start),
// the Windows counterpart of a Unix process group.
//
// The job is created with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE and its only
// handle is ours (not inheritable), so when this process exits for any
// reason, even killed hard, the kernel closes the handle and kills the
// emulator: what Pdeathsig does on Linux.
type procGroup struct {
	job     windows.Handle
	process windows.Handle // our own handle on node, for CPU time
}

// newProcGroup puts the process p, just started with sysProcAttr, into a new
// kill-on-close job.
//
// node runs for a moment outside the job, between its start and
// AssignProcessToJobObject; a child it started in that window would not be
// in the job. Azurite starts no child processes, so this is accepted rather
// than starting node suspended: os/exec closes the main thread's handle, so
// resuming would need the undocumented NtResumeProcess or a thread
// enumeration, and a mistake there would hang every start.
//
// The process is opened by pid because os.Process does not expose its
// handle (Process.WithHandle needs Go 1.26). That is safe: p has not been
// waited for, so it still holds its own handle and the pid cannot have been
// reused by another process.
func newProcGroup(p *os.Process) (*procGroup, error) {
	h, err := windows.OpenProcess(
		windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.PROCESS_QUERY_LIMITED_INFORMATION,
		false, uint32(p.Pid))
	if err != nil {
		return nil, fmt.Errorf("opening process %d: %w", p.Pid, err)
	}
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		_ = windows.CloseHandle(h)
		return nil, fmt.Errorf("creating a job object: %w", err)
	}
	g := &procGroup{job: job, process: h}
	if err := setKillOnClose(job); err != nil {
		g.close()
		return nil, fmt.Errorf("configuring the job object: %w", err)
	}
	// A process already in a job (the Go program may run inside one, e.g.
	// under a CI service, and node inherited it) can still be assigned:
	// since Windows 8 jobs nest.
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		g.close()
		return nil, fmt.Errorf("assigning process %d to a job object: %w", p.Pid, err)
	}
	return g, nil
}

// setKillOnClose makes job kill its processes when its last handle closes.
func setKillOnClose(job windows.Handle) error {
	info := &windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{
			LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
		},
	}
	// The struct is passed as a uintptr, which the garbage collector does not
	// track; pinning keeps it in place (and on the heap) for the call.
	var pin runtime.Pinner
	pin.Pin(info)
	defer pin.Unpin()
	_, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(info)), uint32(unsafe.Sizeof(*info)))
	return err
}

// terminate kills every process in the job at once. graceful is ignored:
// Windows has no SIGTERM to send a console program. The nearest thing,
// Ctrl-Break via GenerateConsoleCtrlEvent, needs a console shared with node
// (a service or GUI program has none), and Azurite does not handle it, so
// node would simply exit, as here. With in-memory storage there is nothing
// for a graceful stop to save either, so Stop and Kill are the same on
// Windows.
func (g *procGroup) terminate(graceful bool) error {
	if err := windows.TerminateJobObject(g.job, 1); err != nil {
		// Should the job be unusable, still stop node itself.
		return errors.Join(err, windows.TerminateProcess(g.process, 1))
	}
	return nil
}

// close closes the job, which kills whatever is still in it, and our
// process handle. halt calls it once, after node has exited.
func (g *procGroup) close() {
	_ = windows.CloseHandle(g.job)
	_ = windows.CloseHandle(g.process)
}

// cpuTime returns node's user+kernel CPU time from GetProcessTimes. Only
// node itself is counted, like /proc on Linux, not the whole job.
func (g *procGroup) cpuTime() (time.Duration, error) {
	var creation, exit, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(g.process, &creation, &exit, &kernel, &user); err != nil {
		return 0, fmt.Errorf("azurite: cpu time: %w", err)
	}
	return filetimeDuration(kernel) + filetimeDuration(user), nil
}

// filetimeDuration converts a FILETIME holding an amount of time (not a
// date: Filetime.Nanoseconds would subtract the 1601 epoch) in 100-ns units.
func filetimeDuration(ft windows.Filetime) time.Duration {
	return time.Duration(uint64(ft.HighDateTime)<<32|uint64(ft.LowDateTime)) * 100
}

// errNoPause is the error of Pause and Resume on Windows, which has no
// SIGSTOP for a process group.
var errNoPause = errors.New("azurite: pausing the emulator is supported on Unix only")

func (g *procGroup) pause() error  { return errNoPause }
func (g *procGroup) resume() error { return errNoPause }
