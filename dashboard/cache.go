package dashboard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// cache holds one reading shared by every viewer, taken again at most once
// per every: the first viewer after it went stale pays for the new one and
// the others wait for it, so that any number of open pages cost what one
// does. It starts no goroutine: the reading runs in the request of the
// viewer who takes it.
type cache[T any] struct {
	every time.Duration
	now   func() time.Time
	load  func(ctx context.Context) T

	sem   chan struct{} // held while reading: one reading at a time
	stale atomic.Int64  // bumped by invalidate

	mu   sync.Mutex
	val  T
	at   time.Time
	gen  int64
	have bool
}

func newCache[T any](every time.Duration, now func() time.Time, load func(context.Context) T) *cache[T] {
	return &cache[T]{every: every, now: now, load: load, sem: make(chan struct{}, 1)}
}

// get returns the current reading and when it was taken, taking a new one
// if it is older than every or was invalidated.
func (c *cache[T]) get(ctx context.Context) (T, time.Time, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		var zero T
		return zero, time.Time{}, ctx.Err()
	}
	defer func() { <-c.sem }()
	c.mu.Lock()
	fresh := c.have && c.gen == c.stale.Load() && c.now().Sub(c.at) < c.every
	val, at := c.val, c.at
	c.mu.Unlock()
	if fresh {
		return val, at, nil
	}
	gen := c.stale.Load()
	val = c.load(ctx)
	at = c.now()
	c.mu.Lock()
	c.val, c.at, c.gen, c.have = val, at, gen, true
	c.mu.Unlock()
	return val, at, nil
}

// invalidate makes the next get take a new reading: after an action
// changed what the reading shows.
func (c *cache[T]) invalidate() { c.stale.Add(1) }
