//go:build windows

package azurite

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockRange locks the whole file, as far as a 64-bit length reaches. The
// range need not exist in the file; only lockers of the same file care.
const lockRange = ^uint32(0)

// tryLock takes an exclusive LockFileEx lock on f without blocking. It
// reports false with a nil error when another handle holds the lock
// (ERROR_LOCK_VIOLATION), so the caller polls again. The lock belongs to the
// handle, so it also excludes another handle opened by this process.
// os.OpenFile opens for synchronous I/O, for which the OVERLAPPED argument
// only carries the range's start offset, zero here.
func tryLock(f *os.File) (bool, error) {
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY,
		0, lockRange, lockRange, new(windows.Overlapped))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION):
		return false, nil
	default:
		return false, err
	}
}

// unlockFile releases the lock taken by tryLock. Windows also releases it
// when the handle is closed, but only "eventually", so unlock explicitly to
// let a waiting process in at once.
func unlockFile(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, lockRange, lockRange, new(windows.Overlapped))
}
