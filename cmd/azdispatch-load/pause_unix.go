//go:build unix

package main

import (
	"os"
	"syscall"
)

// pauseSupported says whether pauseProcess works here.
const pauseSupported = true

// pauseProcess stops every thread of p until resumeProcess: SIGSTOP cannot
// be caught or ignored, so p notices nothing, not even time passing, until
// it runs again and finds its clock moved on.
func pauseProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// resumeProcess lets p, stopped by pauseProcess, run again.
func resumeProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
