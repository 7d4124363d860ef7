package azdispatch

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"
)

// RateLimit returns a Middleware that starts handler calls no faster than
// limiter allows: for a downstream API with a quota. Give several listeners
// (of any types, in one process) the same limiter and they share the quota.
//
// A call waits for its turn inside the handler's time: the message stays
// hidden, its visibility renewed, and HandlerTimeout runs. A wait cut short
// by the call's context (a shutdown, ownership lost) ends as the handler's
// would; a turn the limiter cannot give before the call's deadline fails the
// call at once, and the message is retried after its retry delay, so size
// HandlerTimeout for the queue the limit may build up. A listener takes
// up to MaxDequeuers × Concurrency messages at once whatever the limit, so
// under a low limit most of them wait their turn hidden; lower Concurrency
// to about what the limit lets through in a visibility timeout. Turns go in
// the order they are asked for, not by listener: one listener with hundreds
// of calls waiting books that many turns ahead of a listener that asks
// later, which is one more reason to keep Concurrency low.
//
// A wait counts as part of the call: a wait the limiter refuses is a
// failure like the handler's own, and counts towards MaxDequeueCount. A
// limiter with a burst of 0 refuses every wait. It panics if limiter is
// nil.
func RateLimit(limiter *rate.Limiter) Middleware {
	if limiter == nil {
		panic("azdispatch: RateLimit with a nil limiter")
	}
	return MiddlewareFunc(func(ctx context.Context, c *Call) error {
		if err := limiter.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("azdispatch: rate limit: %w", err)
		}
		return c.Next(ctx)
	})
}
