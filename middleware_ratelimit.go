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
// to about what the limit lets through in a visibility timeout.
func RateLimit(limiter *rate.Limiter) Middleware {
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
