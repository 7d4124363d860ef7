package azdispatch

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azdispatch/azdispatch/internal/ratelimit"
)

// RequestLimiter paces requests to at most a set rate, so that a process
// stays under a storage account's scalability target (about 20,000 requests
// per second) instead of finding it through 503 ServerBusy answers, each of
// which is a request spent for nothing and a delay. Give it to an account
// through AccountOptions.Limiter: every HTTP attempt of that account's queue
// and blob clients then waits for its turn (a retry takes a turn without
// waiting, the SDK's retry back-off being its wait). Several Account values
// of one storage account in a process may share a limiter.
//
// The rate is this process's share: the service counts the account's
// requests from every client, so a fleet of n processes gives each 1/n of
// what it means to use, and some headroom (say 90%) is wise, since the
// service does not say over what window it measures. Requests may run ahead
// of the rate by a tenth of a second's worth (at least one request) after a
// quiet spell; beyond that they wait, in the order they asked. Every request
// of the account waits its turn, deletes and a lease's renewals too, so at
// the busiest they queue behind receives: a rate the process keeps reaching
// adds that queue's wait to every request.
//
// A request whose context ends while it waits is not sent; its turn is given
// back if no later request has been given one, so that the turns of waiting
// requests are never handed out twice. Over any stretch, at most the rate,
// the burst and the retries of that stretch go through; the retries' turns
// make later requests wait, so the rate holds over longer stretches.
//
// A nil *RequestLimiter does not limit. A RequestLimiter is safe for
// concurrent use.
type RequestLimiter struct{ core *ratelimit.Limiter }

// NewRequestLimiter returns a limiter of perSecond requests per second (at
// least one per 30 years, at most 10⁹). A rate that is not positive, or not
// finite, means no limit (nil).
func NewRequestLimiter(perSecond float64) *RequestLimiter {
	core := ratelimit.New(perSecond)
	if core == nil {
		return nil
	}
	return &RequestLimiter{core: core}
}

// Wait blocks until a request may be sent, and then returns nil, or until
// ctx ends, and then returns ctx's error (its cause, if it has one).
func (l *RequestLimiter) Wait(ctx context.Context) error {
	if l == nil {
		return nil
	}
	return l.core.Wait(ctx)
}

// The limiter sits in an account's pipeline twice. limitPolicy, per call,
// waits for the first attempt's turn on the caller's context, before the
// SDK's retry policy starts the attempt's TryTimeout: a wait in the queue
// must not use up the time the request has on the wire, nor end as a
// timeout that looks like an unreachable endpoint. limitRetryPolicy, per
// attempt, takes a turn for each retry, another billable request, without
// waiting for it: a retry is already delayed by the SDK's retry back-off,
// and a wait there would run inside its TryTimeout. The requests that ask
// after it wait the longer, so the rate holds over any stretch longer than
// the retries' burst. Both sit before the counting policy, so that an
// attempt is counted when it is sent, not when it starts to wait.
type (
	limitPolicy      struct{ limiter *RequestLimiter }
	limitRetryPolicy struct{ limiter *RequestLimiter }
	attemptsKey      struct{}
)

func (p limitPolicy) Do(req *policy.Request) (*http.Response, error) {
	ctx := req.Raw().Context()
	if err := p.limiter.Wait(ctx); err != nil {
		return nil, err
	}
	return req.WithContext(context.WithValue(ctx, attemptsKey{}, new(atomic.Int32))).Next()
}

func (p limitRetryPolicy) Do(req *policy.Request) (*http.Response, error) {
	if attempts, _ := req.Raw().Context().Value(attemptsKey{}).(*atomic.Int32); attempts != nil && attempts.Add(1) > 1 {
		p.limiter.core.Reserve(time.Now())
	}
	return req.Next()
}
