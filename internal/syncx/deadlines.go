package syncx

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Deadlines hands out contexts that end Timeout to one second more after
// they are handed out, all children of Base: one context a second is
// shared by every caller in that second, instead of a timer each. A
// listener settles messages (deletes, releases, renewals, poison moves)
// with them: they outlive the listener's shutdown, so that it settles what
// it finished, and bound each request.
//
// Set Base and Timeout before the first Get; Get is safe for concurrent use.
type Deadlines struct {
	Base    context.Context
	Timeout time.Duration

	cur atomic.Pointer[sharedDeadline] // read without a lock by every Get
	mu  sync.Mutex                     // serialises replacing cur
}

// sharedDeadline is one shared context and when it was made: it is handed
// out for a second from then.
type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	made   time.Time
}

// fresh tells whether s may still be handed out. It reads only the
// monotonic clock, at about half the cost of time.Now: Get runs once for
// every message a listener settles.
func (s *sharedDeadline) fresh() bool { return s != nil && time.Since(s.made) < time.Second }

// Get returns a context that ends between Timeout and Timeout plus a
// second from now.
func (d *Deadlines) Get() context.Context {
	if s := d.cur.Load(); s.fresh() {
		return s.ctx
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.cur.Load(); s.fresh() {
		return s.ctx // another Get replaced it meanwhile
	}
	// The one it replaces ends by itself when its deadline passes.
	s := &sharedDeadline{made: time.Now()}
	s.ctx, s.cancel = context.WithDeadline(d.Base, s.made.Add(time.Second+d.Timeout))
	d.cur.Store(s)
	return s.ctx
}

// Stop releases the current context's timer; the older ones have ended or
// end by themselves within Timeout.
func (d *Deadlines) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.cur.Load(); s != nil {
		s.cancel()
	}
}
