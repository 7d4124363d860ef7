package syncx

import (
	"context"
	"time"
)

// Sleep waits for d, until wake is closed (a nil wake never is) or until ctx
// ends; it reports whether ctx is still live. A d of zero or less does not
// wait.
func Sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		return ctx.Err() == nil
	case <-t.C:
		return true
	}
}

// IsClosed reports whether a wake-up channel has been closed. It does not
// block; on a channel that carries values it would take one.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
