package azdispatch

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// breaker is the circuit breaker of one shard, or of one account's shards
// together. After a failure the shard is left alone for a jittered,
// exponentially growing time; when that has passed, the next request tries
// it again (half-open): success closes the breaker, failure opens it for
// longer. Jitter keeps a fleet of clients from coming back all at once.
type breaker struct {
	failing   atomic.Bool // a fast path for succeed, called after every request
	mu        sync.Mutex
	failures  int64
	openUntil time.Time
	lastErr   error
}

// open reports whether the breaker turns requests away at now, and until when.
func (b *breaker) open(now time.Time) (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Before(b.openUntil), b.openUntil
}

// fail records a failure at now and opens the breaker; it returns the new
// failure count and how long it stays open.
func (b *breaker) fail(now time.Time, err error, minWait, maxWait time.Duration) (int64, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.failing.Store(true)
	wait := retryDelay(minWait, maxWait, b.failures, rand.Float64())
	b.openUntil = now.Add(wait)
	b.lastErr = err
	return b.failures, wait
}

// succeed closes the breaker; it reports whether it had been failing.
func (b *breaker) succeed() bool {
	if !b.failing.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.failures > 0
	b.failures, b.openUntil, b.lastErr = 0, time.Time{}, nil
	b.failing.Store(false)
	return was
}

func (b *breaker) state() (failures int64, openUntil time.Time, lastErr error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures, b.openUntil, b.lastErr
}

// ShardHealth is one shard's state as its ShardedQueue sees it.
type ShardHealth struct {
	Shard     string    // the shard's name
	Healthy   bool      // false while it is backed off after failures
	Failures  int64     // failures in a row, of the shard or of its whole account
	RetryAt   time.Time // when a backed-off shard is tried again
	LastError error     // the failure that backed it off
}

// fault classifies an error of a shard request: whether it says the shard
// is unwell (so it should be backed off), and whether it says the whole
// account endpoint is (a transport failure: refused connection, DNS,
// timeout, with no HTTP answer at all). Errors about the message or the
// caller (a too large text, a stale pop receipt, a context the caller
// ended) are not the shard's fault.
func fault(ctx context.Context, err error) (shard, account bool) {
	if err == nil || ctx.Err() != nil {
		return false, false
	}
	for _, notShard := range []error{ErrMessageTooLarge, ErrInvalidText, ErrInvalidConfig, ErrOwnershipLost} {
		if errors.Is(err, notShard) {
			return false, false
		}
	}
	var se *StorageError
	if errors.As(err, &se) && se.StatusCode == 0 {
		return true, true
	}
	// 503 ServerBusy, 500 OperationTimedOut, a queue that is gone and cannot
	// be made again, a revoked credential: all of them are this shard's.
	return true, false
}

// throttledMax caps the back-off of a shard that answers 503 ServerBusy
// (its queue, or its account's requests, ingress or egress, over target).
// Such a shard is alive and over a target that is a rate per second: it
// takes requests again within about a second, and a longer pause would only
// leave its share undrained while its back-off grows with every 503 (the
// simulated load test's drain-unpaced variant throttles shards this way).
// Other 503s, like other failures, back off up to RetryMax.
const throttledMax = time.Second

// throttled reports whether err is the service throttling: 503 ServerBusy.
func throttled(err error) bool {
	var se *StorageError
	return errors.As(err, &se) && se.StatusCode == http.StatusServiceUnavailable && se.Code == "ServerBusy"
}
