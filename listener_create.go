package azdispatch

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/azdispatch/azdispatch/internal/backoff"
	"github.com/azdispatch/azdispatch/internal/syncx"
)

// queueCreator is a source that can create its queue: *Queue, *ShardedQueue.
type queueCreator interface {
	Create(ctx context.Context) error
}

// createQueue creates the source's queue, for ListenerOptions.CreateQueue,
// trying again after a back-off until it succeeds or ctx ends (nil), or a
// fatal error has stood for FatalTimeout (that error).
func (l *Listener[T]) createQueue(ctx context.Context) error {
	c := l.src.(queueCreator) // checked by NewListener
	for failures := int64(1); ; failures++ {
		err := c.Create(ctx)
		if err == nil {
			l.storageSucceeded(opCreate)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		l.storageFailed(err)
		if err := l.fatalTooLong(time.Now()); err != nil {
			return err
		}
		l.log.Warn("creating the queue failed", "err", err, "failures", failures)
		wait := hintedWait(err, backoff.Retry(250*time.Millisecond, 30*time.Second, failures, rand.Float64()))
		if l.opts.FatalTimeout > 0 {
			wait = min(wait, l.fatalCheckEvery())
		}
		if !syncx.Sleep(ctx, wait, nil) {
			return nil
		}
	}
}
