//go:build !windows

package netx

import (
	"errors"
	"syscall"
)

// Refused reports whether err is a refused connection: nothing listens at
// the address.
func Refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
