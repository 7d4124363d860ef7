// Package breaker is the circuit breaker of one shard, or of one account's
// shards together: after a failure the shard is left alone for a jittered,
// exponentially growing time.
package breaker

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/backoff"
)

// Breaker is a circuit breaker. After a failure it turns requests away for a
// jittered, exponentially growing time; when that has passed, one request
// tries again (half-open, see Admit): success closes the breaker, failure
// opens it for longer. Jitter keeps a fleet of clients from coming back all
// at once, and one trial at a time keeps a shard that hangs from holding
// every request that comes while the trial waits for its answer.
//
// The zero value is a closed breaker, ready to use. A Breaker is safe for
// concurrent use; it must not be copied after first use.
type Breaker struct {
	failing   atomic.Bool // a fast path for Succeed, called after every request
	mu        sync.Mutex
	failures  int64
	openUntil time.Time
	// trialUntil is when the request admitted to try a half-open breaker
	// may be taken for lost, and another admitted: set by Admit, cleared
	// by the trial's outcome.
	trialUntil time.Time
	since      time.Time // the first failure of the run; zero while closed
	lastFail   time.Time // the last failure counted
	lastErr    error
}

// Free reports whether Admit would admit a request at now, without
// admitting one: the breaker is closed, or half-open with no trial out.
func (b *Breaker) Free(now time.Time) bool {
	if !b.failing.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures == 0 || !now.Before(b.openUntil) && !now.Before(b.trialUntil)
}

// Admit reports whether a request may be made at now: always while the
// breaker is closed; while it is open, never; once its wait has passed
// (half-open), to one request at a time, the trial, whose outcome (Succeed
// or Fail) decides. A trial whose outcome never comes (its caller gave up,
// or the failure was not the shard's) lets another be admitted after hold.
func (b *Breaker) Admit(now time.Time, hold time.Duration) bool {
	if !b.failing.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.failures == 0:
		return true
	case now.Before(b.openUntil), now.Before(b.trialUntil):
		return false
	}
	b.trialUntil = now.Add(hold)
	return true
}

// Open reports whether the breaker turns requests away at now, and until
// when. Once now reaches that time it reports false, while the failures
// still count (half-open): the next Fail opens it for longer.
func (b *Breaker) Open(now time.Time) (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Before(b.openUntil), b.openUntil
}

// Fail records err as a failure at now and opens the breaker for
// backoff.Retry(minWait, maxWait, failures): minWait·2^(failures−1), capped
// at maxWait, with ±20% jitter that never passes maxWait. It returns the new
// count of failures in a row and how long the breaker stays open.
func (b *Breaker) Fail(now time.Time, err error, minWait, maxWait time.Duration) (failures int64, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.failures == 1 {
		b.since = now
	}
	b.lastFail = now
	b.failing.Store(true)
	wait = backoff.Retry(minWait, maxWait, b.failures, rand.Float64())
	b.openUntil = now.Add(wait)
	b.trialUntil = time.Time{}
	b.lastErr = err
	return b.failures, wait
}

// FailStarted is Fail for a request that started at started: one that was
// already under way when another failure was counted (requests in flight
// together when a shard stopped answering, which all fail at once) is the
// same outage, and does not count again: it records err as the last error
// and leaves the back-off as it is. It reports whether it counted.
func (b *Breaker) FailStarted(started, now time.Time, err error, minWait, maxWait time.Duration) (failures int64, wait time.Duration, counted bool) {
	b.mu.Lock()
	if b.failures > 0 && started.Before(b.lastFail) {
		b.lastErr = err
		failures, wait = b.failures, max(b.openUntil.Sub(now), 0)
		b.mu.Unlock()
		return failures, wait, false
	}
	b.mu.Unlock()
	failures, wait = b.Fail(now, err, minWait, maxWait)
	return failures, wait, true
}

// Hold keeps an open breaker open until at least until: the service said,
// with a Retry-After, when it will take requests again.
func (b *Breaker) Hold(until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures > 0 && until.After(b.openUntil) {
		b.openUntil = until
	}
}

// Succeed closes the breaker; it reports whether it had been failing. It is
// meant to be called after every successful request, so a breaker that is
// not failing answers without taking its lock.
func (b *Breaker) Succeed() bool {
	if !b.failing.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.failures > 0
	b.failures, b.openUntil, b.trialUntil, b.since, b.lastFail, b.lastErr = 0, time.Time{}, time.Time{}, time.Time{}, time.Time{}, nil
	b.failing.Store(false)
	return was
}

// State returns the failures in a row, when the breaker closes (half-opens)
// again, and the failure that opened it last. A closed breaker returns zero
// values.
func (b *Breaker) State() (failures int64, openUntil time.Time, lastErr error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures, b.openUntil, b.lastErr
}

// Since is when the failures in a row began; zero while the breaker is
// closed.
func (b *Breaker) Since() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.since
}
