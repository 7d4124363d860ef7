package azdispatch

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// readyReceiveFailures is how many failed receives in a row make a listener
// not ready: with the receive back-off (250 ms, 500 ms, 1 s, …) that is
// about two seconds of a storage account that does not answer.
const readyReceiveFailures = 3

// fatalStale is how long a fatal error stands without failing again. A
// receive that fails fatally fails again within its 30 s back-off; a delete,
// a poison move or a blob read fails again when its message comes back. If
// the message never does (it expired, another listener took it), nothing
// would clear the error: it lapses after this long instead.
const fatalStale = 10 * time.Minute

// health is what a listener has learnt from storage's answers: its last
// failure, failed receives in a row, and the fatal errors still standing,
// one per kind of request (receive, delete, send to the poison queue, blob
// read, …), each cleared by the next success of its kind. A fatal error
// is one retrying will not fix (see [StorageError.Fatal]).
type health struct {
	standing        atomic.Int32 // len(fatal), read without the lock after every success
	receiveFailures atomic.Int64

	mu      sync.Mutex
	lastErr error
	lastAt  time.Time
	fatal   map[Op]standingFault
}

// standingFault is a fatal error, when its kind of request began to fail,
// and when it last failed.
type standingFault struct {
	err         error
	since, last time.Time
}

// fail records err, a failed request of the listener's; it reports whether
// err is fatal and no fatal error of its kind was standing.
func (h *health) fail(err error, now time.Time) (began bool) {
	var se *StorageError
	fatal := errors.As(err, &se) && se.Fatal()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr, h.lastAt = err, now
	if !fatal {
		return false
	}
	if f, ok := h.fatal[se.Op]; ok && now.Sub(f.last) < fatalStale {
		f.err, f.last = err, now
		h.fatal[se.Op] = f
		return false
	}
	if h.fatal == nil {
		h.fatal = make(map[Op]standingFault)
	}
	h.fatal[se.Op] = standingFault{err: err, since: now, last: now}
	h.standing.Store(int32(len(h.fatal)))
	return true
}

// succeed records a successful request of kind o; it returns the fatal error
// it clears, if one was standing.
func (h *health) succeed(o Op) (cleared error) {
	if h.standing.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.fatal[o]
	if !ok {
		return nil
	}
	delete(h.fatal, o)
	h.standing.Store(int32(len(h.fatal)))
	return f.err
}

// fatalState is the oldest fatal error still standing at now and since
// when; nil when there is none.
func (h *health) fatalState(now time.Time) (error, time.Time) {
	if h.standing.Load() == 0 {
		return nil, time.Time{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var oldest standingFault
	for op, f := range h.fatal {
		if now.Sub(f.last) >= fatalStale {
			delete(h.fatal, op)
			continue
		}
		if oldest.err == nil || f.since.Before(oldest.since) {
			oldest = f
		}
	}
	h.standing.Store(int32(len(h.fatal)))
	return oldest.err, oldest.since
}

// last is the last failure and when it happened.
func (h *health) last() (error, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastErr, h.lastAt
}

// storageFailed records a failed storage request of the listener. The first
// fatal error of a kind is logged as an error and reported as [EventFatal];
// the listener goes on trying, and Run returns it after FatalTimeout if set.
func (l *Listener[T]) storageFailed(err error) {
	if err == nil || !l.health.fail(err, time.Now()) {
		return
	}
	l.alerts().Error("storage refuses the listener in a way that will not pass without a change (credential, permissions, the queue); it keeps trying", "err", err)
	l.event(Event{Kind: EventFatal, Err: err})
}

// storageSucceeded records a successful request of kind o, which ends a
// fatal state of that kind.
func (l *Listener[T]) storageSucceeded(o Op) {
	if err := l.health.succeed(o); err != nil {
		l.log.Info("storage accepts the listener again", "op", o, "was", err)
		l.event(Event{Kind: EventRecovered, Err: err})
	}
}

// Ready reports whether the listener is doing its work: nil while [Listener.Run] is
// running and storage answers; otherwise an error matching [ErrNotReady] that
// says why: not running, a fatal error standing (a refused credential, a
// deleted or disabled queue, a poison queue that cannot be written), or
// receives failing several times in a row. It makes no request: serve it
// from a readiness probe as often as you like.
func (l *Listener[T]) Ready() error {
	if !l.running.Load() {
		return fmt.Errorf("%w: not running", ErrNotReady)
	}
	if err, since := l.health.fatalState(time.Now()); err != nil {
		return fmt.Errorf("%w: fatal storage error since %s: %w", ErrNotReady, since.UTC().Format(time.RFC3339), err)
	}
	if n := l.health.receiveFailures.Load(); n >= readyReceiveFailures {
		err, _ := l.health.last()
		return fmt.Errorf("%w: %d receives failed in a row; the last: %w", ErrNotReady, n, err)
	}
	return nil
}

// Degraded says what of the listener's source is out while the listener
// still does its work: for a [ShardedQueue], the shards that are out, and
// why (see [ShardedQueue.Degraded]); nil when nothing is, or the source
// cannot tell. [Listener.Ready] stays nil meanwhile: the other shards are
// received from. It makes no request: a readiness probe shows it.
func (l *Listener[T]) Degraded() error {
	if l.caps.Degraded != nil {
		return l.caps.Degraded()
	}
	return nil
}

// fatalTooLong returns the error Run ends with when a fatal error has stood
// for FatalTimeout; nil otherwise, or when FatalTimeout is not set.
func (l *Listener[T]) fatalTooLong(now time.Time) error {
	if l.opts.FatalTimeout <= 0 {
		return nil
	}
	err, since := l.health.fatalState(now)
	if err == nil || now.Sub(since) < l.opts.FatalTimeout {
		return nil
	}
	return wrapf(err, "listener on %q stopped after a fatal storage error stood for %v", l.src.Name(), now.Sub(since).Round(time.Second))
}

// fatalCheckEvery is how often Run looks for a fatal error that has stood
// for FatalTimeout: a tenth of it, between 100 ms and 5 s.
func (l *Listener[T]) fatalCheckEvery() time.Duration {
	return min(max(l.opts.FatalTimeout/10, 100*time.Millisecond), 5*time.Second)
}
