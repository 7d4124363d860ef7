//go:build !unix && !windows

package azdispatch_test

import (
	"errors"
	"os"
)

// pauseProcess has no way to stop a process on this system: the test that
// needs it fails rather than pass without testing anything.
func pauseProcess(*os.Process) error { return errors.ErrUnsupported }

func resumeProcess(*os.Process) error { return errors.ErrUnsupported }
