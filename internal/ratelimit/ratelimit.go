// Package ratelimit paces requests to at most a set rate, so that a process
// stays under a storage account's scalability target instead of finding it
// through 503 ServerBusy answers.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Limiter paces requests to at most a set rate with the generic cell rate
// algorithm (GCRA): it keeps the theoretical arrival time of the next
// request, and each request moves it on by one interval, from now at the
// earliest. Requests may run ahead of the rate by a tenth of a second's
// worth (at least one request) after a quiet spell; beyond that they wait,
// in the order they asked, so a quiet spell earns no more than that burst.
//
// A request whose context ends while it waits is not sent; its turn is given
// back only if it is still the last one given: a later request holds its own
// turn, and moving the schedule back under it would let two requests share
// one, so the turns of waiting requests are never handed out twice. Over any
// stretch, at most the rate, the burst and the turns taken without waiting
// (Reserve, for retries) go through; those turns make later requests wait,
// so the rate holds over longer stretches.
//
// A nil *Limiter does not limit. A Limiter is safe for concurrent use.
type Limiter struct {
	interval  time.Duration // between two requests at the rate
	tolerance time.Duration // how far ahead of the rate requests may run

	mu  sync.Mutex
	tat time.Time // when the next request is due at the rate (its theoretical arrival time)
}

// Rates outside these bounds are taken as the nearest bound: a nanosecond
// between requests is as fast as a time.Duration can say, and a request every
// thirty years is as slow as anyone means.
const (
	maxRate = 1e9
	minRate = 1e-9
)

// New returns a limiter of perSecond requests per second (at least one per
// 30 years, at most 10⁹). A rate that is not positive, or not finite, means
// no limit (nil).
func New(perSecond float64) *Limiter {
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		return nil
	}
	perSecond = min(max(perSecond, minRate), maxRate)
	// Rounded up, so that the rate is never exceeded.
	interval := time.Duration(math.Ceil(float64(time.Second) / perSecond))
	burst := max(1, math.Floor(perSecond/10))
	return &Limiter{interval: interval, tolerance: time.Duration(burst-1) * interval}
}

// Wait blocks until a request may be sent, and then returns nil, or until
// ctx ends, and then returns ctx's error (its cause, if it has one). A
// context that has ended already takes no turn; one that ends while waiting
// gives its turn back (see Limiter).
func (l *Limiter) Wait(ctx context.Context) error {
	if l == nil {
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	now := time.Now()
	due := l.Reserve(now)
	d := due.Sub(now) - l.tolerance
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		l.GiveBack(due)
		return context.Cause(ctx)
	}
}

// Reserve takes the next turn at now, without waiting for it, and returns
// when it is due at the rate; the request may go a burst's worth of
// intervals before that. A retry, already delayed by its own back-off, takes
// its turn this way: the requests that ask after it wait the longer.
func (l *Limiter) Reserve(now time.Time) (due time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	due = l.tat
	if due.Before(now) {
		due = now
	}
	l.tat = due.Add(l.interval)
	return due
}

// GiveBack returns the turn due at due, unused, if it is still the last one
// given: a later request holds its own turn, and moving the schedule back
// under it would let two requests share one.
func (l *Limiter) GiveBack(due time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tat.Equal(due.Add(l.interval)) {
		l.tat = due
	}
}
