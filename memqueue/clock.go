package memqueue

import (
	"sync"
	"time"

	"github.com/azdispatch/azdispatch/internal/syncx"
)

// Clock tells a queue the time. The queue reads it for every call; a
// Listener's own timers (renewals, handler timeouts, back-offs) still run
// on real time.
type Clock interface {
	Now() time.Time
}

// realClock is the system's clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// ManualClock is a [Clock] that moves only when told to. Queues on it are
// told when it moves, and wake the listeners subscribed to them, so that a
// message whose retry delay Advance has passed is received at once. It is
// safe for concurrent use.
type ManualClock struct {
	mu    sync.Mutex
	now   time.Time
	moved syncx.Subscribers
}

// NewManualClock returns a clock that reads start until moved.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a negative d is ignored) and wakes
// the listeners of every queue on it.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	c.mu.Unlock()
	c.moved.Wake()
}

// subscribe registers wake to be called after every Advance, until
// cancelled.
func (c *ManualClock) subscribe(wake func()) (cancel func()) { return c.moved.Subscribe(wake) }
