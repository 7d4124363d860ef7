package azurite

import (
	"context"
	"fmt"
	"os"
	"time"
)

// lockPoll is how often lockFile retries while another process holds the
// lock. The lock is taken without blocking and retried, rather than with a
// blocking call, because a blocking lock cannot be abandoned when ctx ends.
const lockPoll = 250 * time.Millisecond

// lockFile takes an exclusive lock on the file at path (creating it),
// polling so that ctx is honoured while another process is installing. The
// lock excludes other processes and other open handles of the same file;
// unlock releases it and closes the file. The lock file itself is left in
// place: removing it would race with a process that has just opened it.
//
// tryLock and unlockFile are per OS: flock on Unix, LockFileEx on Windows.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("azurite: install lock: %w", err)
	}
	for {
		ok, err := tryLock(f)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("azurite: install lock %s: %w", path, err)
		}
		if ok {
			return func() {
				_ = unlockFile(f)
				_ = f.Close()
			}, nil
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("azurite: waiting for install lock %s: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
