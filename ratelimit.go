package azdispatch

import (
	"context"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// RequestLimiter paces requests to at most a set rate, so that a process
// stays under a storage account's scalability target (about 20,000 requests
// per second) instead of finding it through 503 ServerBusy answers, each of
// which is a request spent for nothing and a delay. Give it to an account
// through AccountOptions.Limiter: every HTTP attempt of that account's queue
// and blob clients, retries included, then waits for its turn. Several
// Account values of one storage account in a process may share a limiter.
//
// The rate is this process's share: the service counts the account's
// requests from every client, so a fleet of n processes gives each 1/n of
// what it means to use. Requests may run ahead of the rate by a tenth of a
// second's worth (at least one request) after a quiet spell; beyond that
// they wait, in the order they asked. A request whose context ends while it
// waits is not sent, and its turn goes to the next request that asks. Every
// request of the account waits its turn, a lease's renewals too: give a
// rate well above what the process needs at its quietest.
//
// A nil *RequestLimiter does not limit. A RequestLimiter is safe for
// concurrent use.
type RequestLimiter struct {
	interval  time.Duration // between two requests at the rate
	tolerance time.Duration // how far ahead of the rate requests may run

	mu  sync.Mutex
	tat time.Time // when the next request is due at the rate (its theoretical arrival time)
}

// NewRequestLimiter returns a limiter of perSecond requests per second. A
// rate that is not positive, or not finite, means no limit (nil).
func NewRequestLimiter(perSecond float64) *RequestLimiter {
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		return nil
	}
	// Rounded up, so that the rate is never exceeded.
	interval := time.Duration(math.Ceil(float64(time.Second) / perSecond))
	burst := max(1, math.Floor(perSecond/10))
	return &RequestLimiter{interval: interval, tolerance: time.Duration(burst-1) * interval}
}

// Wait blocks until a request may be sent, or ctx ends; then it returns
// ctx's error (its cause, if it has one).
func (l *RequestLimiter) Wait(ctx context.Context) error {
	if l == nil {
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	d := l.reserve(time.Now())
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		l.giveBack()
		return context.Cause(ctx)
	}
}

// giveBack returns a turn that was reserved and not used: the schedule moves
// back one interval, so that requests cancelled in numbers (at shutdown, say)
// do not leave the next ones waiting for turns nobody takes.
func (l *RequestLimiter) giveBack() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tat = l.tat.Add(-l.interval)
}

// reserve takes the next turn at now and returns how long to wait for it.
// It is the generic cell rate algorithm: each request moves the theoretical
// arrival time on by one interval; a request may go as soon as it is no more
// than tolerance ahead of it.
func (l *RequestLimiter) reserve(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	due := l.tat
	if due.Before(now) {
		due = now
	}
	l.tat = due.Add(l.interval)
	return due.Sub(now) - l.tolerance
}

// limitPolicy makes every HTTP attempt of a client wait for its limiter. It
// sits in the per-retry slot before the counting policy, so that an attempt
// is counted when it is sent, not when it starts to wait.
type limitPolicy struct{ limiter *RequestLimiter }

func (p limitPolicy) Do(req *policy.Request) (*http.Response, error) {
	if err := p.limiter.Wait(req.Raw().Context()); err != nil {
		return nil, err
	}
	return req.Next()
}
