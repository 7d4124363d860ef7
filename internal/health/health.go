// Package health keeps what a listener has learnt from storage's answers:
// its last failure, failed receives in a row, and the fatal errors still
// standing, one per kind of request, each cleared by the next success of its
// kind or lapsing when that kind has not failed for [Stale].
//
// A fatal error is one retrying will not fix: a refused credential, a
// deleted queue. The caller decides which errors are fatal and of what kind;
// this package only keeps the account.
package health

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stale is how long a fatal error stands without failing again. A receive
// that fails fatally fails again within its 30 s back-off; a delete, a poison
// move or a blob read fails again when its message comes back. If the
// message never does (it expired, another listener took it), nothing would
// clear the error: it lapses after this long instead.
const Stale = 10 * time.Minute

// Record is the account of one listener, keyed by kind of request K. The
// zero value is ready to use; it is safe for concurrent use.
type Record[K comparable] struct {
	// ReceiveFailures counts failed receives in a row; the caller resets
	// it on a receive that succeeds.
	ReceiveFailures atomic.Int64

	standing atomic.Int32 // len(fatal), read without the lock after every success

	mu      sync.Mutex
	lastErr error
	lastAt  time.Time
	fatal   map[K]fault
}

// fault is a fatal error, when its kind of request began to fail, and when
// it last failed.
type fault struct {
	err         error
	since, last time.Time
}

// Fail records err, a failed request of kind k at now, fatal or not; it
// reports whether err is fatal and no fatal error of its kind was standing.
func (r *Record[K]) Fail(k K, err error, fatal bool, now time.Time) (began bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr, r.lastAt = err, now
	if !fatal {
		return false
	}
	if f, ok := r.fatal[k]; ok && now.Sub(f.last) < Stale {
		f.err, f.last = err, now
		r.fatal[k] = f
		return false
	}
	if r.fatal == nil {
		r.fatal = make(map[K]fault)
	}
	r.fatal[k] = fault{err: err, since: now, last: now}
	r.standing.Store(int32(len(r.fatal)))
	return true
}

// Succeed records a successful request of kind k; it returns the fatal
// error it clears, if one was standing. With none standing it takes no lock.
func (r *Record[K]) Succeed(k K) (cleared error) {
	if r.standing.Load() == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.fatal[k]
	if !ok {
		return nil
	}
	delete(r.fatal, k)
	r.standing.Store(int32(len(r.fatal)))
	return f.err
}

// Fatal is the oldest fatal error still standing at now and since when; nil
// when there is none. Errors that have lapsed by now are forgotten.
func (r *Record[K]) Fatal(now time.Time) (error, time.Time) {
	if r.standing.Load() == 0 {
		return nil, time.Time{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest fault
	for k, f := range r.fatal {
		if now.Sub(f.last) >= Stale {
			delete(r.fatal, k)
			continue
		}
		if oldest.err == nil || f.since.Before(oldest.since) {
			oldest = f
		}
	}
	r.standing.Store(int32(len(r.fatal)))
	return oldest.err, oldest.since
}

// Last is the last failure and when it happened.
func (r *Record[K]) Last() (error, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr, r.lastAt
}
