package azdispatch

import (
	"context"
	"sync"
	"time"
)

// settleContexts hands out the contexts of deletes and releases: they keep
// the session's values (its transaction counter) but not its cancellation,
// so that a shutdown settles what it finished, and end settleTimeout to one
// second more after they are handed out. One context a second is shared by
// every message settled in that second, instead of a timer per message.
type settleContexts struct {
	base context.Context // the session's work without its cancellation

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	fresh  time.Time // ctx is handed out until then
}

// get returns a context that ends between settleTimeout and settleTimeout
// plus a second from now.
func (c *settleContexts) get() context.Context {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil || !now.Before(c.fresh) {
		// The one it replaces ends by itself when its deadline passes.
		c.fresh = now.Add(time.Second)
		c.ctx, c.cancel = context.WithDeadline(c.base, c.fresh.Add(settleTimeout))
	}
	return c.ctx
}

// stop releases the current context's timer; the older ones have ended or
// end by themselves within settleTimeout.
func (c *settleContexts) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
}
