package pause

import (
	"context"
	"sync"
	"time"
)

// Reading is one read of a queue's pause: the state, and the service's
// time when it answered (the Date of its answer), so that the expiry is
// judged on the service's clock whatever the local one says.
type Reading struct {
	State      State
	ServiceNow time.Time
}

// Gate is what a listener's receives pass through: it holds the pause as
// last read, reads it again once it is Every old (one read at a time,
// whoever asks), and holds the callers while the pause is on. A read that
// fails keeps what was known. A Gate is safe for concurrent use; its zero
// value is not usable (see New).
type Gate struct {
	every time.Duration
	read  func(ctx context.Context) (Reading, error)
	now   func() time.Time

	mu      sync.Mutex
	state   State
	offset  time.Duration // the service's clock less the local one, at the last reading
	readAt  time.Time     // local; zero: never read
	reading chan struct{} // closed when the read under way ends; nil if none
	changed chan struct{} // closed, and replaced, when a reading is taken
}

// New returns a gate that reads with read at most once per every (a
// reading given to Saw counts), with now the local clock.
func New(every time.Duration, read func(ctx context.Context) (Reading, error), now func() time.Time) *Gate {
	return &Gate{every: every, read: read, now: now, changed: make(chan struct{})}
}

// Saw takes a reading made elsewhere (the same request that reads a
// queue's depth brings its metadata), as if the gate had made it at now.
func (g *Gate) Saw(r Reading, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.take(r, now)
}

func (g *Gate) take(r Reading, now time.Time) {
	g.readAt = now
	if !r.ServiceNow.IsZero() {
		g.offset = r.ServiceNow.Sub(now)
	}
	// A pause that has ended stays in the metadata until a Resume: it is
	// kept as none, or every Wait would take it for one to read again.
	g.state = r.State
	if !r.State.ActiveAt(now.Add(g.offset)) {
		g.state = State{}
	}
	close(g.changed)
	g.changed = make(chan struct{})
}

// State returns the pause as last read, and whether it holds now on the
// service's clock as last learned.
func (g *Gate) State() (State, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state, g.state.ActiveAt(g.now().Add(g.offset))
}

// Wait returns once the queue is not paused, as the last reading says,
// reading it first if that reading is Every old, or was of a pause that
// has since ended (it may have been extended); it returns ctx's error if
// ctx ends first. While one caller reads, the others wait for its reading
// only if there is none yet, or the last was of a pause. paused is called
// once, with the state, when Wait first finds the queue paused.
func (g *Gate) Wait(ctx context.Context, paused func(State)) error {
	told := false
	for {
		if err := g.fresh(ctx); err != nil {
			return err
		}
		g.mu.Lock()
		now := g.now()
		svcNow := now.Add(g.offset)
		if !g.state.ActiveAt(svcNow) {
			g.mu.Unlock()
			return nil
		}
		st := g.state
		wait := min(g.every-now.Sub(g.readAt), st.Until.Sub(svcNow))
		changed := g.changed
		g.mu.Unlock()
		if !told && paused != nil {
			paused(st)
			told = true
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// Holds reports, as Wait would find it, whether the queue is paused now,
// reading it first as Wait does; it never waits for the pause to end. A
// reader of many queues asks it of each, and reads from those not paused.
func (g *Gate) Holds(ctx context.Context) (State, bool) {
	_ = g.fresh(ctx) // on ctx's end, the last reading stands
	return g.State()
}

// Stale reports whether the next Wait or Holds would read: so that a
// reader of many queues reads theirs at once rather than one after another.
func (g *Gate) Stale() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stale(g.now())
}

// CarryFrom starts g with what prev has read: a reader whose queues
// change keeps the pauses of those that stay without reading them again.
func (g *Gate) CarryFrom(prev *Gate) {
	prev.mu.Lock()
	state, offset, readAt := prev.state, prev.offset, prev.readAt
	prev.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.state, g.offset, g.readAt = state, offset, readAt
}

// stale reports whether the last reading must be read again: it is Every
// old, or there is none, or it was of a pause that has since ended. Hold
// g.mu.
func (g *Gate) stale(now time.Time) bool {
	return g.readAt.IsZero() || now.Sub(g.readAt) >= g.every ||
		!g.state.Until.IsZero() && !g.state.ActiveAt(now.Add(g.offset))
}

// fresh makes the last reading one to judge by: it reads if that reading
// is stale and no one else is reading; it waits for another caller's read
// only if there is no reading yet, or the last was of a pause. It returns
// ctx's error if ctx ends first.
func (g *Gate) fresh(ctx context.Context) error {
	for {
		g.mu.Lock()
		now := g.now()
		svcNow := now.Add(g.offset)
		if !g.stale(now) {
			g.mu.Unlock()
			return nil
		}
		if err := ctx.Err(); err != nil {
			g.mu.Unlock()
			return err // a read now would be made, and paid for, in vain
		}
		if g.reading == nil {
			done := make(chan struct{})
			g.reading = done
			g.mu.Unlock()
			r, err := g.read(ctx)
			g.mu.Lock()
			g.reading = nil
			close(done)
			switch {
			case err == nil:
				g.take(r, g.now())
			case ctx.Err() == nil:
				// Keep what was known; the receive that follows meets the
				// storage's trouble itself. Ended pauses are not read again
				// until the next interval.
				g.readAt = g.now()
				if !g.state.ActiveAt(svcNow) {
					g.state = State{}
				}
			}
			g.mu.Unlock()
			return ctx.Err()
		}
		if !g.readAt.IsZero() && !g.state.ActiveAt(svcNow) {
			// Another caller is reading: go on by the last reading rather
			// than wait for a read that may hang (one caller pays for it).
			g.mu.Unlock()
			return nil
		}
		reading := g.reading
		g.mu.Unlock()
		select {
		case <-reading:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
