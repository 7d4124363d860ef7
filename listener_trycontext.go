package azdispatch

import (
	"context"
	"sync"
	"sync/atomic"
)

// tryContext is a try's context: it ends when ownership is lost (cause
// [ErrOwnershipLost]), when a handler runs past HandlerTimeout (cause
// [ErrHandlerTimeout]), at the drain timeout (cause [ErrDrainTimeout]), or
// once the message is settled. Renewals stop when it ends, so that the
// message reappears for another try even if a handler never returns.
//
// The context itself is made only when something asks for it (a handler
// that reads its context's Done or values, a storage request, a wait):
// most tries end without one, and a context made for every message was two
// of the listener's allocations per message. Whether the try has ended,
// and why, is known without it.
type tryContext struct {
	ended atomic.Bool

	mu     sync.Mutex
	parent context.Context
	ctx    context.Context // nil until asked for
	cancel context.CancelCauseFunc
	cause  error // set once ended
}

// begin sets the parent of t's context: the session's, for its values.
func (t *try) begin(parent context.Context) { t.tc.parent = parent }

// context returns t's context, making it on first use; it has ended
// already if t has.
func (t *try) context() context.Context {
	c := &t.tc
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithCancelCause(c.parent)
		if c.ended.Load() {
			c.cancel(c.cause)
		}
	}
	return c.ctx
}

// end ends t's context with cause ([context.Canceled] if nil); the first
// cause wins, as with a [context.CancelCauseFunc].
func (t *try) end(cause error) {
	c := &t.tc
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended.Load() {
		return
	}
	if cause == nil {
		cause = context.Canceled
	}
	c.cause = cause
	c.ended.Store(true)
	if c.cancel != nil {
		c.cancel(cause)
	}
}

// ended reports whether t's context has ended, without making it.
func (t *try) ended() bool { return t.tc.ended.Load() }

// cause is why t's context ended (as [context.Cause] says it), nil while it
// has not.
func (t *try) cause() error {
	c := &t.tc
	if !c.ended.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}
