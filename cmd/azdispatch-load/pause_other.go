//go:build !unix

package main

import (
	"errors"
	"os"
	"runtime"
)

// pauseSupported says whether pauseProcess works here: there is no
// SIGSTOP outside Unix.
const pauseSupported = false

var errNoPause = errors.New("pausing a process (SIGSTOP and SIGCONT) is not supported on " + runtime.GOOS)

func pauseProcess(*os.Process) error { return errNoPause }

func resumeProcess(*os.Process) error { return errNoPause }
