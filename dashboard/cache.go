package dashboard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// cache holds one reading shared by every viewer, taken again at most once
// per every: the first viewer after it went stale starts the new one and
// the others wait for it, so that any number of open pages cost what one
// does.
//
// The reading belongs to no viewer: it runs in a goroutine of the handler's
// lifetime (Close stops it and waits for it), under a context that keeps the
// values of the request that started it but not its cancellation, so that
// a viewer who hangs up gives up waiting without spoiling what the others
// see. Each reading bounds itself (readTimeout).
type cache[T any] struct {
	life  *lifetime
	every time.Duration
	now   func() time.Time
	load  func(ctx context.Context) T

	stale atomic.Int64 // bumped by invalidate

	mu       sync.Mutex
	val      T
	at       time.Time
	gen      int64
	have     bool
	inflight *flight[T] // the reading under way, if any: one at a time
}

// flight is one reading under way; done is closed when val and at are set.
type flight[T any] struct {
	gen  int64 // the invalidations it saw when it started
	done chan struct{}
	val  T
	at   time.Time
}

func newCache[T any](life *lifetime, every time.Duration, now func() time.Time, load func(context.Context) T) *cache[T] {
	return &cache[T]{life: life, every: every, now: now, load: load}
}

// get returns the current reading and when it was taken, taking a new one
// if it is older than every or was invalidated. It returns an error only
// when ctx ends first (the viewer left); the reading goes on for the
// others.
func (c *cache[T]) get(ctx context.Context) (T, time.Time, error) {
	want := c.stale.Load() // a reading that started before this is not enough
	for {
		c.mu.Lock()
		if c.have && c.gen == c.stale.Load() && c.now().Sub(c.at) < c.every {
			val, at := c.val, c.at
			c.mu.Unlock()
			return val, at, nil
		}
		f := c.inflight
		if f == nil {
			f = &flight[T]{gen: c.stale.Load(), done: make(chan struct{})}
			values := context.WithoutCancel(ctx)
			if !c.life.start(func(life context.Context) { c.run(f, values, life) }) {
				// Closed: read within this request, under its context.
				c.mu.Unlock()
				return c.readAlone(ctx)
			}
			c.inflight = f
		}
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			var zero T
			return zero, time.Time{}, ctx.Err()
		}
		if f.gen >= want {
			return f.val, f.at, nil
		}
		// It started before an invalidation this viewer must see (an action
		// it took): take the next one.
	}
}

// run takes a reading for f under a context with the values of values
// that ends with life (Close), and keeps it unless Close cut it short.
func (c *cache[T]) run(f *flight[T], values, life context.Context) {
	ctx, cancel := context.WithCancel(values)
	defer cancel()
	stop := context.AfterFunc(life, cancel)
	defer stop()
	f.val = c.load(ctx)
	f.at = c.now()
	c.mu.Lock()
	if ctx.Err() == nil {
		c.val, c.at, c.gen, c.have = f.val, f.at, f.gen, true
	}
	c.inflight = nil
	c.mu.Unlock()
	close(f.done)
}

// readAlone takes a reading within the request, once the handler is
// closed: it is kept for the others unless the viewer left before it
// ended.
func (c *cache[T]) readAlone(ctx context.Context) (T, time.Time, error) {
	gen := c.stale.Load()
	val := c.load(ctx)
	at := c.now()
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, time.Time{}, err
	}
	c.mu.Lock()
	c.val, c.at, c.gen, c.have = val, at, gen, true
	c.mu.Unlock()
	return val, at, nil
}

// invalidate makes the next get take a new reading: after an action
// changed what the reading shows.
func (c *cache[T]) invalidate() { c.stale.Add(1) }
