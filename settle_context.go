package azdispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// settleTimeout bounds a delete, release, renewal or poison move, which
// outlive Run's context so that a shutdown settles what it finished.
const settleTimeout = 30 * time.Second

// settleContexts hands out the contexts of deletes, releases, renewals and
// poison moves: they keep the session's values (its transaction counter)
// but not its cancellation, so that a shutdown settles what it finished,
// and end settleTimeout to one second more after they are handed out. One context a second is shared by
// every message settled in that second, instead of a timer per message.
type settleContexts struct {
	base context.Context // the session's work without its cancellation

	cur atomic.Pointer[sharedSettle] // read without a lock by every settle
	mu  sync.Mutex                   // serialises replacing cur
}

// sharedSettle is one shared context and until when it is handed out.
type sharedSettle struct {
	ctx    context.Context
	cancel context.CancelFunc
	fresh  time.Time
}

// get returns a context that ends between settleTimeout and settleTimeout
// plus a second from now.
func (c *settleContexts) get() context.Context {
	now := time.Now()
	if s := c.cur.Load(); s != nil && now.Before(s.fresh) {
		return s.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.cur.Load(); s != nil && now.Before(s.fresh) {
		return s.ctx // another settle replaced it meanwhile
	}
	// The one it replaces ends by itself when its deadline passes.
	s := &sharedSettle{fresh: now.Add(time.Second)}
	s.ctx, s.cancel = context.WithDeadline(c.base, s.fresh.Add(settleTimeout))
	c.cur.Store(s)
	return s.ctx
}

// stop releases the current context's timer; the older ones have ended or
// end by themselves within settleTimeout.
func (c *settleContexts) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.cur.Load(); s != nil {
		s.cancel()
	}
}
