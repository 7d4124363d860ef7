package keylock

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Pool keeps the places of one name that a process holds for its calls
// (a fleet's handler calls, say): a place a call gave back stays held,
// its lease renewed, for the next call, and is given up once it has been
// idle for a while, or held for long (so that a busy process does not keep
// places from the others for good). Under a steady load a call then costs
// no request.
type Pool struct {
	locks            *Locks
	name             string
	idleFor, holdFor time.Duration

	mu   sync.Mutex
	idle []*Place
	// held counts the places the process holds, in use or idle, and the
	// one a search is asking for: never more than there are, even if a
	// lease expired unseen (a clock that jumped, a process paused), so
	// that the process alone never runs past the limit.
	held   int
	reaper *time.Timer
	freed  chan struct{} // closed and replaced when a place is given back
	search chan struct{} // one search for a free place at a time
	// nextSearch is when the next search may start; read and written by
	// the holder of search only.
	nextSearch time.Time
	release    sync.WaitGroup
	getting    atomic.Int32 // calls of GetUnlessCrowded under way
}

// ErrCrowded is GetUnlessCrowded's error when as many calls as it allows
// are getting a place already.
var ErrCrowded = errors.New("as many wait for a place as may")

// GetUnlessCrowded is Get, unless most calls of it are under way already
// (this one not counted): then it fails at once with ErrCrowded, with no
// request. A listener bounds with it how many of its messages wait in hand
// for a place, so that a class at its limit does not fill its slots.
func (p *Pool) GetUnlessCrowded(ctx context.Context, most int) (*Place, error) {
	defer p.getting.Add(-1)
	if p.getting.Add(1) > int32(most) {
		return nil, ErrCrowded
	}
	return p.Get(ctx)
}

// Place is a place of a pool held by this process.
type Place struct {
	lock        *Lock
	since, last time.Time
}

// Every is about how often a call that finds every place held looks for a
// free one.
const Every = 200 * time.Millisecond

// searchTries is how many places a search tries, of those its listing
// found free, one request each.
const searchTries = 3

// NewPool returns a pool over locks' places of name: a place is given up
// once idle for idleFor, or held for holdFor.
func NewPool(locks *Locks, name string, idleFor, holdFor time.Duration) *Pool {
	return &Pool{locks: locks, name: name, idleFor: idleFor, holdFor: holdFor,
		freed: make(chan struct{}), search: make(chan struct{}, 1)}
}

// Get returns a place for a call: one held and idle, or a free one, which
// it looks for a few places at a time until ctx ends. It fails with ctx's
// error then. One call of the process looks at a time, about every Every:
// the others wait for its finding, or for a place given back.
func (p *Pool) Get(ctx context.Context) (*Place, error) {
	for {
		p.mu.Lock()
		if n := len(p.idle); n > 0 {
			pl := p.idle[n-1]
			p.idle[n-1] = nil
			p.idle = p.idle[:n-1]
			p.mu.Unlock()
			return pl, nil
		}
		freed, full := p.freed, p.held >= p.locks.places
		p.mu.Unlock()
		if full {
			select {
			case <-freed:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}

		select {
		case p.search <- struct{}{}:
			pl, err := p.find(ctx, freed)
			<-p.search
			if pl != nil || err != nil {
				return pl, err
			}
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// find is the one search of the process: a few places tried, no sooner
// than about Every after the last search that found none free; until
// then, a wait, cut short by a place given back. It returns nil and no
// error when the caller should look again.
func (p *Pool) find(ctx context.Context, freed chan struct{}) (*Place, error) {
	if wait := time.Until(p.nextSearch); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
			return nil, nil
		case <-freed:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The place is counted before it is asked for. The service cannot
	// be trusted to say that this process holds every place: a lease
	// that expired unseen (a clock that jumped, a process paused) lists
	// as free, and a search that began while one place was free, and
	// waited here for another search to take it, would take a place
	// more.
	p.mu.Lock()
	if p.held >= p.locks.places {
		p.mu.Unlock()
		return nil, nil // taken meanwhile: wait for one given back
	}
	p.held++
	p.mu.Unlock()
	// Bounded: a blob service that does not answer is looked at again
	// later, as one that refuses is.
	tctx, cancel := context.WithTimeout(ctx, giveUpWithin)
	lock, err := p.locks.takeListed(tctx, p.name, searchTries)
	cancel()
	if err == nil {
		now := time.Now()
		return &Place{lock: lock, since: now, last: now}, nil
	}
	p.mu.Lock()
	p.held--
	p.freeOne() // a Get that found the pool full counted this one
	p.mu.Unlock()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Every place tried is held, or a request failed: look again a
	// little later either way.
	p.nextSearch = time.Now().Add(Every/2 + mrand.N(Every))
	return nil, nil
}

// freeOne wakes the calls waiting for a place to be given back. The
// caller holds mu.
func (p *Pool) freeOne() {
	close(p.freed)
	p.freed = make(chan struct{})
}

// Put gives back a place a call is done with: kept for the next call, or
// given up if it has been held for holdFor.
func (p *Pool) Put(pl *Place) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(pl.since) >= p.holdFor {
		p.giveUp(pl)
	} else {
		pl.last = now
		p.idle = append(p.idle, pl)
	}
	p.freeOne()
	if p.reaper == nil && len(p.idle) > 0 {
		p.reaper = time.AfterFunc(p.idleFor, p.reap)
	}
}

// reap gives up the places idle for idleFor, and comes back while some
// are kept.
func (p *Pool) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaper == nil {
		return // Release came first
	}
	now := time.Now()
	kept := p.idle[:0]
	for _, pl := range p.idle {
		if now.Sub(pl.last) >= p.idleFor || now.Sub(pl.since) >= p.holdFor {
			p.giveUp(pl)
		} else {
			kept = append(kept, pl)
		}
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	if len(p.idle) > 0 {
		p.reaper.Reset(p.idleFor)
	} else {
		p.reaper = nil
	}
}

// giveUp releases pl's lease from a goroutine the pool waits for in
// Release. The caller holds mu.
func (p *Pool) giveUp(pl *Place) {
	p.held--
	p.release.Go(func() {
		ctx, cancel := context.WithTimeout(pl.lock.base, giveUpWithin)
		defer cancel()
		_ = pl.lock.Release(ctx) // a lease not released expires
	})
}

// Release gives up every idle place and waits for the releases under way:
// the process holds no place of the pool's afterwards, unless a call
// holds one still. The pool stays usable.
func (p *Pool) Release() {
	p.mu.Lock()
	for _, pl := range p.idle {
		p.giveUp(pl)
	}
	clear(p.idle)
	p.idle = p.idle[:0]
	if p.reaper != nil {
		p.reaper.Stop()
		p.reaper = nil
	}
	p.mu.Unlock()
	p.release.Wait()
}
