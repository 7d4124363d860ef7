package azdispatch

import (
	"context"
	"sync"
	"time"
)

// stuckWarnEvery is how often Run logs handlers that outlive the drain.
const stuckWarnEvery = 10 * time.Second

// shutdown waits for the dequeuers, then for the handlers. The drain timeout
// counts from the moment Run's context ended; when it expires the handlers'
// contexts are cancelled, and shutdown goes on waiting for them.
func (l *Listener[T]) shutdown(dequeuers, handlers *sync.WaitGroup, stopWork context.CancelCauseFunc) {
	timer := time.NewTimer(max(l.cfg.DrainTimeout, 0))
	defer timer.Stop()
	tick := time.NewTicker(stuckWarnEvery)
	defer tick.Stop()
	expired := false
	wait := func(wg *sync.WaitGroup) {
		done := make(chan struct{})
		go func() { // waited for: wait returns only once done is closed
			wg.Wait()
			close(done)
		}()
		for {
			select {
			case <-done:
				return
			case <-timer.C:
				expired = true
				stopWork(ErrDrainTimeout)
			case <-tick.C:
				if expired {
					l.log.Warn("handlers still running after the drain timeout; Run waits for them",
						"in_flight", l.stats.inFlight.Load())
				}
			}
		}
	}
	wait(dequeuers) // handlers.Go is called only by dequeuers: wait for them first
	wait(handlers)
}

// releaseUnstarted makes messages received during shutdown visible again at
// once, in parallel, so that another listener gets them without waiting out
// the visibility timeout.
func (l *Listener[T]) releaseUnstarted(work context.Context, slots *slots, batch []*Delivery) {
	var wg sync.WaitGroup
	for _, d := range batch {
		wg.Go(func() {
			defer slots.give(1)
			ctx, cancel := settleContext(work)
			defer cancel()
			l.count(l.release(ctx, d, 0), &l.stats.released)
		})
	}
	wg.Wait()
}
