package azdispatch

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// minRenewRetry is the shortest wait before a failed renewal is tried
// again, while the message is still hidden.
const minRenewRetry = 100 * time.Millisecond

// renewer keeps a message hidden while its handler runs on, renewing the
// visibility timeout and keeping the new pop receipt. The session's watch
// starts one for a try still running at half its visibility timeout; most
// messages are settled before and never have one.
type renewer struct {
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	lost    bool
	busy    sync.WaitGroup // a renewal in flight
	// ifApplied is the latest the message reappears if the last renewal
	// that failed took effect all the same (its answer was lost), in Unix
	// nanoseconds; zero if none failed.
	ifApplied atomic.Int64
}

// startRenewer renews t's message now, and again at half-life, until stop is
// called or the try's context ends. If ownership is lost it ends the try
// with cause [ErrOwnershipLost]. It only schedules: the watch calls it under
// its lock.
func (l *Listener[T]) startRenewer(t *try) *renewer {
	r := &renewer{}
	d := t.d
	vis := l.opts.VisibilityTimeout
	renew := func() {
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		r.busy.Add(1)
		r.mu.Unlock()
		defer r.busy.Done()
		if t.ctx.Err() != nil {
			// Timed out, lost or drained: stop renewing so the message
			// reappears for another try even if the handler never returns.
			return
		}
		start := time.Now()
		err := l.src.SetVisibility(t.s.settle.Get(), d, vis)
		var next time.Duration
		switch {
		case err == nil:
			l.storageSucceeded(OpUpdate)
			l.stats.renewed.Add(1)
			t.hidden(start, time.Now(), vis)
			next = vis / 2
		case errors.Is(err, ErrOwnershipLost):
			r.mu.Lock()
			r.lost = true
			r.mu.Unlock()
			t.end(ErrOwnershipLost)
			return
		default:
			l.storageFailed(err)
			// A renewal whose answer was lost may have taken effect: the
			// message may stay hidden that much longer.
			r.ifApplied.Store(dueBy(time.Now(), vis).UnixNano())
			left := time.Until(t.hiddenAtLeast())
			l.log.Warn("visibility renewal failed", "id", d.ID, "err", err, "hidden_for", left)
			if left <= 0 {
				// Visible to other receivers now: the handler is told, as
				// when another has taken it. Its result still counts: a
				// success is deleted if the receipt still holds.
				t.end(ErrOwnershipLost)
				return
			}
			// Try again while there is time, and once more at its end.
			next = min(max(left/4, minRenewRetry), left)
		}
		r.mu.Lock()
		if !r.stopped {
			r.timer.Reset(next)
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.timer = time.AfterFunc(0, renew)
	r.mu.Unlock()
	return r
}

// stop ends the renewals, waits for one in flight (so the caller sees its
// pop receipt), and reports whether ownership was lost.
func (r *renewer) stop() bool {
	r.mu.Lock()
	r.stopped = true
	r.timer.Stop()
	r.mu.Unlock()
	r.busy.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}
