//go:build unix

package azdispatch_test

import (
	"os"
	"syscall"
)

// pauseProcess stops every thread of p until resumeProcess: SIGSTOP cannot
// be caught or ignored, so p notices nothing, not even time passing.
func pauseProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// resumeProcess lets p, stopped by pauseProcess, run again.
func resumeProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
