package records

import (
	"context"
	"time"

	"github.com/azdispatch/azdispatch/internal/syncx"
)

// Clock is the clock records are judged on: the storage service's, as its
// answers tell it, or a memory store's own.
type Clock interface {
	// Now is the store's time, as best known.
	Now() time.Time
	// Known reports whether Now is the store's time rather than a guess.
	Known() bool
	// Sleep waits until the clock reads until, wake is closed, or ctx
	// ends; it reports whether ctx is still live.
	Sleep(ctx context.Context, until time.Time, wake <-chan struct{}) bool
}

// NewClock returns a Clock reading now. known reports whether it is the
// store's time (always, if nil). moved, if not nil, subscribes a function
// to every move of a clock that moves only when told to (a manual one), so
// that Sleep follows it; without it, Sleep waits on real time.
func NewClock(now func() time.Time, known func() bool, moved func(wake func()) (cancel func())) Clock {
	return &clock{now: now, known: known, moved: moved}
}

type clock struct {
	now   func() time.Time
	known func() bool
	moved func(wake func()) (cancel func())
}

func (c *clock) Now() time.Time { return c.now() }

func (c *clock) Known() bool { return c.known == nil || c.known() }

// Sleep on a manual clock wakes at each of its moves to look.
func (c *clock) Sleep(ctx context.Context, until time.Time, wake <-chan struct{}) bool {
	if c.moved == nil {
		return syncx.Sleep(ctx, until.Sub(c.now()), wake)
	}
	moved := make(chan struct{}, 1)
	cancel := c.moved(func() {
		select {
		case moved <- struct{}{}:
		default:
		}
	})
	defer cancel()
	for c.now().Before(until) {
		select {
		case <-ctx.Done():
			return false
		case <-wake:
			return ctx.Err() == nil
		case <-moved:
		}
	}
	return ctx.Err() == nil
}
