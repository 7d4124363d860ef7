// Package ratelimit gates a listener's receives by a rate limit that
// listeners may share, so that the messages a listener cannot start soon
// stay in the queue, visible to other workers, rather than hidden in the
// process waiting for a turn.
package ratelimit

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"
)

// ErrNoTurns is the error of a gate whose limiter gives no turns at all: a
// burst of 0 with a finite rate.
var ErrNoTurns = errors.New("the rate limiter gives no turns (its burst is 0)")

// Gate books the turns of one listener on a limiter that others may share.
//
// A receive asks first for the turns its messages would take, one each: at
// most half a horizon's worth of the limiter's rate at once, and none that
// comes later than the limit. So the listener takes no more messages than
// it can start soon, and the rest wait in the queue. A gate asks again
// only once its last turn is within half a horizon, so that it keeps about
// a horizon booked ahead, and never more: two gates on one limiter, both
// with a backlog, book half a horizon each in turn, and one that asks
// while the other holds its horizon books right after it. Listeners
// sharing a limiter thus take turns in chunks, each as large as its demand
// up to half a horizon, and none waits behind another's backlog.
//
// A Gate is safe for concurrent use; the asks of one listener's dequeuers
// are made one at a time.
type Gate struct {
	limiter *rate.Limiter
	horizon time.Duration
	limit   time.Duration // no turn is booked further ahead than this
	ask     chan struct{} // a token: held while one ask is made
	// bookedUntil is when the last turn this gate holds comes (guarded by
	// holding the ask token).
	bookedUntil time.Time
}

// New returns a gate on limiter that keeps about horizon booked ahead, and
// books no turn further ahead than limit (at least horizon).
func New(limiter *rate.Limiter, horizon, limit time.Duration) *Gate {
	horizon = max(horizon, time.Millisecond)
	return &Gate{limiter: limiter, horizon: horizon, limit: max(limit, horizon), ask: make(chan struct{}, 1)}
}

// chunk is how many turns one ask may book: half a horizon's worth at the
// limiter's rate now, at least one.
func (g *Gate) chunk(max int) int {
	perSecond := float64(g.limiter.Limit())
	if perSecond >= float64(max)*2/g.horizon.Seconds() { // rate.Inf too
		return max
	}
	return min(max, int(perSecond*g.horizon.Seconds()/2)+1)
}

// Turns are the turns one ask booked, earliest first.
type Turns struct {
	g     *Gate
	res   []*rate.Reservation
	at    []time.Time
	prior time.Time // the gate's bookedUntil before the ask
}

// Len is how many turns were booked. Nil Turns, of no gate, have none.
func (t *Turns) Len() int {
	if t == nil {
		return 0
	}
	return len(t.at)
}

// At is when turn i comes; the zero time for nil Turns, which limit
// nothing.
func (t *Turns) At(i int) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.at[i]
}

// Take books up to max turns that come within the horizon, at least one:
// it waits while the gate's own turns are still far off, or while the
// limiter has none within the horizon. It fails only with ctx's cause, or
// with ErrNoTurns.
func (g *Gate) Take(ctx context.Context, max int) (*Turns, error) {
	for {
		select {
		case g.ask <- struct{}{}:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		wait, turns, err := g.try(max)
		<-g.ask
		if err != nil || turns != nil {
			return turns, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, context.Cause(ctx)
		case <-timer.C:
		}
	}
}

// try books what it can now, holding the ask token; when it books nothing
// it says how long to wait before asking again.
func (g *Gate) try(max int) (time.Duration, *Turns, error) {
	now := time.Now()
	if askFrom := g.bookedUntil.Add(-g.horizon / 2); now.Before(askFrom) {
		return askFrom.Sub(now), nil, nil
	}
	t := &Turns{g: g, prior: g.bookedUntil}
	n := g.chunk(max)
	for len(t.at) < n {
		r := g.limiter.ReserveN(now, 1)
		if !r.OK() {
			t.cancel(now, 0)
			return 0, nil, ErrNoTurns
		}
		delay := r.DelayFrom(now)
		if delay > g.limit {
			r.CancelAt(now)
			if len(t.at) == 0 {
				// Asked again once the first turn comes within the limit.
				return max1ms(delay - g.limit), nil, nil
			}
			break
		}
		t.res = append(t.res, r)
		t.at = append(t.at, now.Add(delay))
	}
	if len(t.at) == 0 { // max < 1
		return 0, t, nil
	}
	g.bookedUntil = t.at[len(t.at)-1]
	return 0, t, nil
}

func max1ms(d time.Duration) time.Duration { return max(d, time.Millisecond) }

// Keep keeps the first n turns and gives back the rest: a receive that
// brought fewer messages than it had turns for. Turns given back serve
// whoever asks next, this listener or another, as far as no later booking
// has been made on the limiter meanwhile.
func (t *Turns) Keep(n int) {
	if t == nil || n >= len(t.at) {
		return
	}
	g := t.g
	g.ask <- struct{}{}
	defer func() { <-g.ask }()
	t.cancel(time.Now(), n)
	if last := t.at[len(t.at)-1]; g.bookedUntil.Equal(last) {
		// No ask of this gate has booked since: its last turn is now n's.
		g.bookedUntil = t.prior
		if n > 0 {
			g.bookedUntil = t.at[n-1]
		}
	}
	t.at, t.res = t.at[:n], t.res[:n]
}

// cancel gives back the turns from the n-th on, latest first: the limiter
// restores a reservation's token only when nothing was reserved after it.
func (t *Turns) cancel(now time.Time, n int) {
	for i := len(t.res) - 1; i >= n; i-- {
		t.res[i].CancelAt(now)
	}
}
