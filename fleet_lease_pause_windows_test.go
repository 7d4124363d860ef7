//go:build windows

package azdispatch_test

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// Windows has no SIGSTOP. NtSuspendProcess suspends every thread of a
// process, as SIGSTOP does, until NtResumeProcess; it is what Sysinternals
// PsSuspend and Resource Monitor's "Suspend process" use. It is exported by
// ntdll but not documented, which is acceptable in a test.
var (
	ntdll            = windows.NewLazySystemDLL("ntdll.dll")
	ntSuspendProcess = ntdll.NewProc("NtSuspendProcess")
	ntResumeProcess  = ntdll.NewProc("NtResumeProcess")
)

// pauseProcess suspends every thread of p until resumeProcess.
func pauseProcess(p *os.Process) error { return ntProcessCall(ntSuspendProcess, p) }

// resumeProcess lets p, suspended by pauseProcess, run again.
func resumeProcess(p *os.Process) error { return ntProcessCall(ntResumeProcess, p) }

func ntProcessCall(proc *windows.LazyProc, p *os.Process) error {
	if err := proc.Find(); err != nil {
		return err
	}
	// By pid: os.Process does not expose its handle. p has not been waited
	// for, so the pid cannot have been reused.
	h, err := windows.OpenProcess(windows.PROCESS_SUSPEND_RESUME, false, uint32(p.Pid))
	if err != nil {
		return fmt.Errorf("OpenProcess %d: %w", p.Pid, err)
	}
	defer windows.CloseHandle(h)
	if status, _, _ := proc.Call(uintptr(h)); status != 0 {
		return fmt.Errorf("%s(%d): NTSTATUS %#x", proc.Name, p.Pid, status)
	}
	return nil
}
