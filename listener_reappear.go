package azdispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// When a message reappears: everything the listener does with a message's
// visibility timeout, and what it notes of it, is here, under one word. A
// message in hand reappears unless it is settled; the listener makes it
// reappear later for a retry delay (reappearForRetry), when it is due (a
// delayed message received early: reappearWhenDue), at once (not tried,
// or received during shutdown: reappearNow), or keeps postponing it while
// its handler runs (the renewer). Whatever it lets go of, it notes in the
// listener's due times when it reappears, so that a dequeuer (or, with
// none running, Run) looks for it then.

// reappearForRetry makes t's message reappear after the retry delay,
// counting it by why.
func (l *Listener[T]) reappearForRetry(ctx context.Context, t *try, why retryCause) {
	if l.reappearIn(ctx, t.d, l.opts.Retry(t.d.DequeueCount), t.reappearsNoLater()) {
		l.stats.retry(why)
	} else {
		l.stats.lost.Add(1)
	}
}

// expectReappearance notes that t's message, left hidden, is due again when its
// visibility timeout ends, so that the listener looks for it then (and
// again later, if a failed renewal may have hidden it for longer). It is
// called once t is out of the watch, or by the watch under its lock: its
// renewer, if any, is then set for good.
func (l *Listener[T]) expectReappearance(t *try) {
	l.due.Add(t.reappearsNoLater())
	if r := t.renew; r != nil {
		if later := r.ifApplied.Load(); later > t.reappearLatest.Load() {
			l.due.Add(time.Unix(0, later))
		}
	}
}

// dueMargin is added to every due time: the service keeps and reports
// its times to the second, so a message may turn visible a little after
// its timeout counted by the local clock, and a dequeuer that looked for it
// a moment too early would take the queue for drained (see
// syncx.DueTimes.Covered) and, in a push-only listener, stop for good.
const dueMargin = time.Second

// reappearsBy is the latest a message hidden for d by a request that returned at
// end is visible again: d in the service's whole seconds, rounded up as it
// counts them, from end, and dueMargin.
func reappearsBy(end time.Time, d time.Duration) time.Time {
	return end.Add(time.Duration(seconds(d))*time.Second + dueMargin)
}

// reappearIn hides d for after (0: visible at once), and records when it is
// due: then; or, if the request fails, at ifFailed (its visibility timeout
// runs on) and then too (a release whose answer was lost may have taken
// effect). It reports success.
func (l *Listener[T]) reappearIn(ctx context.Context, d *Delivery, after time.Duration, ifFailed time.Time) bool {
	after = min(max(after, 0), MaxVisibility) // a custom RetryFunc may stray
	if err := l.srcRelease(ctx, d, after); err != nil {
		l.storageFailed(err)
		l.due.Add(ifFailed)
		if applied := reappearsBy(time.Now(), after); applied.After(ifFailed) {
			l.due.Add(applied)
		}
		l.msgLog(d).Warn("release failed; the message reappears after its visibility timeout", "err", err)
		return false
	}
	l.storageSucceeded(OpUpdate)
	l.due.Add(reappearsBy(time.Now(), after))
	return true
}

// hiddenBetween records that t's message was hidden for vis by a request made
// between start and end: a receive, or a renewal.
func (t *try) hiddenBetween(start, end time.Time, vis time.Duration) {
	t.reappearEarliest.Store(start.Add(vis).UnixNano())
	t.reappearLatest.Store(reappearsBy(end, vis).UnixNano())
}

// reappearsNoSooner is the earliest t's message may reappear unless it is
// settled.
func (t *try) reappearsNoSooner() time.Time { return time.Unix(0, t.reappearEarliest.Load()) }

// reappearsNoLater is the latest t's message reappears unless it is settled.
func (t *try) reappearsNoLater() time.Time { return time.Unix(0, t.reappearLatest.Load()) }

// reappearWhenDue is the action for d, a delayed message received before it is
// due by the service's clock: hidden again for after (what remains, at
// most 7 days), its due line counting the hop and the service's dequeue count
// so far, so that this delivery is not taken for a try.
func reappearWhenDue(d *Delivery, due *wire.DueLine, after time.Duration) action {
	next := *due
	next.Hops++
	next.Seen = d.DequeueCount
	return action{kind: actReappearWhenDue, after: after, text: next.Encode() + bodyText(d.Text)}
}

// snoozeRoom is what a message's text may grow by when it is snoozed: a
// due line of its own, or "seen" in the one it has. A publisher leaves it
// free in the text of a message sent with a key, whose wait for its key
// is a snooze.
const snoozeRoom = 64

// snooze hides t's message again for after without counting a try: its
// text gets a due line (its own, or a new one) whose Seen counts this
// delivery too (see whenDue), so that the next delivery's DequeueCount is
// this one's again; the tries before it still count. A text with no room
// for the line is released for after as a retry is, and this delivery
// counts.
func (l *Listener[T]) snooze(ctx context.Context, t *try, after time.Duration) {
	d := t.d
	due := wire.DueLine{}
	if t.due != nil {
		due = *t.due
	}
	due.Seen++
	text := due.Encode() + bodyText(d.Text)
	if len(text) > MaxMessageSize {
		l.msgLog(d).Warn("no room in the text to snooze without a try; released as a retry", "size", len(d.Text))
		if l.reappearIn(ctx, d, after, t.reappearsNoLater()) {
			l.stats.retry(causeError)
		} else {
			l.stats.lost.Add(1)
		}
		return
	}
	d.Text = text
	l.count(l.reappearIn(ctx, d, after, t.reappearsNoLater()), &l.stats.snoozed)
}

// reappearNow makes received messages that will not be handled (received
// during shutdown, or beyond what was asked for) visible again at once, in
// parallel, so that another receiver gets them without waiting out the
// visibility timeout. Each gives back its slot, if slots is not nil.
func (l *Listener[T]) reappearNow(s *session, slots *syncx.Slots, batch []*Delivery) {
	ifFailed := reappearsBy(time.Now(), l.opts.VisibilityTimeout)
	for _, d := range batch {
		s.handlers.Go(func() {
			if slots != nil {
				defer slots.Give(1)
			}
			l.count(l.reappearIn(s.settle.Get(), d, 0, ifFailed), &l.stats.released)
			l.letGo(d)
		})
	}
}

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
		if t.ended() {
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
			t.hiddenBetween(start, time.Now(), vis)
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
			r.ifApplied.Store(reappearsBy(time.Now(), vis).UnixNano())
			left := time.Until(t.reappearsNoSooner())
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
