package netx

import (
	"errors"
	"syscall"

	"golang.org/x/sys/windows"
)

// Refused reports whether err is a refused connection: nothing listens at
// the address. Windows reports it as WSAECONNREFUSED.
func Refused(err error) bool {
	return errors.Is(err, windows.WSAECONNREFUSED) || errors.Is(err, syscall.ECONNREFUSED)
}
