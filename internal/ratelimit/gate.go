// Package ratelimit gates a listener's receives by a rate limit that
// listeners may share, so that the messages a listener cannot start soon
// stay in the queue, visible to other workers, rather than hidden in the
// process waiting for a turn.
package ratelimit

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrNoTurns is the error of a gate whose limiter gives no turns at all: a
// burst of 0 with a finite rate, or a rate of 0 with its burst spent.
var ErrNoTurns = errors.New("the rate limiter gives no turns (a rate or a burst of 0)")

// maxWait bounds one wait of Take for turns, so that a limiter whose rate
// is raised while a gate waits is seen within it.
const maxWait = time.Second

// Gate books the turns of one listener on a limiter that others may share.
//
// Before a receive, Take says how many messages the listener may ask for:
// those whose turns come within the limit, at most half a horizon's worth
// of the limiter's rate. It reserves nothing: after the receive, Use
// reserves one turn for each message that came, so that turns a receive
// found no message for are never taken from the limiter (x/time/rate gives
// back a cancelled reservation's tokens only when nothing was reserved
// after it). A gate asks again only once its last turn is within half a
// horizon, so that it keeps about a horizon booked ahead, and never more:
// two gates on one limiter, both with a backlog, book half a horizon each
// in turn, and one that asks while the other holds its horizon books
// right after it. Listeners sharing a limiter thus take turns in chunks,
// each as large as its demand up to half a horizon, and none waits behind
// another's backlog.
//
// A Gate is safe for concurrent use. The dequeuers of one listener ask in
// parallel: turns an ask counted and has not yet used (its receive under
// way) are pending, and the next ask counts on none of them again.
type Gate struct {
	limiter *rate.Limiter
	horizon time.Duration
	limit   time.Duration // no turn is counted on further ahead than this

	mu          sync.Mutex
	bookedUntil time.Time // when the last turn this gate booked comes
	pending     int       // turns counted by asks whose Use has not come
}

// New returns a gate on limiter that keeps about horizon booked ahead, and
// counts on no turn further ahead than limit (at least horizon).
func New(limiter *rate.Limiter, horizon, limit time.Duration) *Gate {
	horizon = max(horizon, time.Millisecond)
	return &Gate{limiter: limiter, horizon: horizon, limit: max(limit, horizon)}
}

// Turns are what one ask may book: Take says how many, Use books them.
type Turns struct {
	g    *Gate
	may  int
	at   []time.Time
	used bool
}

// Len is how many turns the ask may book before Use, and how many it
// booked after. Nil Turns, of no gate, have none.
func (t *Turns) Len() int {
	switch {
	case t == nil:
		return 0
	case t.used:
		return len(t.at)
	}
	return t.may
}

// At is when booked turn i comes; the zero time for nil Turns, which limit
// nothing.
func (t *Turns) At(i int) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.at[i]
}

// Take says how many of up to max messages may be asked for, at least
// one: it waits while the gate's own turns are still far off, or while the
// limiter has none within the limit. Those turns are pending until Use,
// which must follow. It fails only with ctx's cause, or with ErrNoTurns.
func (g *Gate) Take(ctx context.Context, max int) (*Turns, error) {
	for {
		g.mu.Lock()
		wait, n, err := g.count(max)
		g.pending += n
		g.mu.Unlock()
		switch {
		case err != nil:
			return nil, err
		case n > 0:
			return &Turns{g: g, may: n}, nil
		}
		timer := time.NewTimer(min(wait, maxWait))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, context.Cause(ctx)
		case <-timer.C:
		}
	}
}

// count says how many turns an ask may book now; when none, how long to
// wait before asking again. The caller holds g.mu.
func (g *Gate) count(max int) (time.Duration, int, error) {
	now := time.Now()
	perSecond := g.limiter.Limit()
	if perSecond == rate.Inf {
		return 0, max, nil
	}
	if g.limiter.Burst() < 1 {
		return 0, 0, ErrNoTurns
	}
	// The limiter's tokens now, less what is reserved ahead (negative
	// then) and what asks of this gate counted on and have not used.
	tokens := g.limiter.TokensAt(now) - float64(g.pending)
	last := g.bookedUntil
	if tokens < 0 && perSecond > 0 && g.pending > 0 {
		// The last pending turn comes when the tokens reach it.
		last = later(last, now.Add(time.Duration(-tokens/float64(perSecond)*float64(time.Second))))
	}
	if askFrom := last.Add(-g.horizon / 2); now.Before(askFrom) {
		return askFrom.Sub(now), 0, nil
	}
	// What accrues by the limit: the turns within it.
	within := math.Floor(tokens + float64(perSecond)*g.limit.Seconds())
	if within < 1 {
		if perSecond <= 0 {
			return 0, 0, ErrNoTurns
		}
		// Asked again once the first turn comes within the limit.
		first := time.Duration((1 - tokens) / float64(perSecond) * float64(time.Second))
		return max1ms(first - g.limit), 0, nil
	}
	chunk := int(float64(perSecond)*g.horizon.Seconds()/2) + 1
	return 0, int(min(float64(max), float64(chunk), within)), nil
}

func max1ms(d time.Duration) time.Duration { return max(d, time.Millisecond) }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Use books a turn for each of the first n messages (at most Len) a
// receive brought, and gives back the rest of what Take counted. A turn
// the limiter refuses (its burst set to 0 meanwhile) comes at once: the
// message is in hand already.
func (t *Turns) Use(n int) {
	if t == nil || t.used {
		return
	}
	g := t.g
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending -= t.may
	t.used = true
	n = min(n, t.may)
	now := time.Now()
	t.at = make([]time.Time, n)
	for i := range n {
		t.at[i] = now
		if r := g.limiter.ReserveN(now, 1); r.OK() {
			t.at[i] = now.Add(r.DelayFrom(now))
		}
	}
	if n > 0 {
		g.bookedUntil = later(g.bookedUntil, t.at[n-1])
	}
}
