package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/memo"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// try is one delivery of a message on its way through the listener.
type try struct {
	s *session
	d *Delivery
	// received is when the receive that brought d was asked for, by the
	// local clock: its visibility timeout runs from about then.
	received time.Time
	// hiddenUntil is the earliest d may reappear unless it is settled, by
	// the local clock, in Unix nanoseconds: its visibility timeout from the
	// start of the receive, or of the last renewal. Renewals are timed by it.
	hiddenUntil atomic.Int64
	// visibleBy is the latest d reappears unless it is settled: its
	// visibility timeout, in the service's whole seconds, from the end of
	// that request, and a margin (see dueBy). Due times are set by it, so
	// that a dequeuer started for d finds it.
	visibleBy atomic.Int64
	// ctx is this try's: it ends when ownership is lost (cause
	// [ErrOwnershipLost]), when a handler runs past HandlerTimeout (cause
	// [ErrHandlerTimeout]), or at the drain timeout (cause [ErrDrainTimeout]).
	// Renewals stop when it ends, so that the message reappears for another
	// try even if a handler never returns.
	ctx context.Context
	end context.CancelCauseFunc
	// renewAt is the try's place in the session's watch until its
	// renewals start; renew is its renewer from then on (set under the
	// watch's lock).
	renewAt watchEntry
	renew   *renewer
	// settling is set, under the watch's lock, once the handler has
	// succeeded and the message is being deleted (see watch.settling).
	settling bool
	// renewFired is set when the watch reaches renewAt; call is a handler
	// call of the try that the watch files then (see watch.startCall).
	renewFired atomic.Bool
	call       atomic.Pointer[handlerCall]
	// blob is the payload blob of an offloaded message, deleted after the
	// message is.
	blob *wire.Pointer
	// saveProgress, set by a batch, records its completed items before the
	// message is seen again (released, lost, or left by a failed delete).
	saveProgress func(context.Context)
	// payloadHeld is what the try holds of the listener's payload budget.
	payloadHeld int64
	// origin is d's receipt as received, read before renewals start: a
	// renewal may replace d.Receipt while batch items are being poisoned,
	// and the poison move routes by it (see besideSender).
	origin any
	// meta is the metadata the message carried, nil if none.
	meta Metadata
	// waited is the message's time in queue (see Message.TimeInQueue).
	waited time.Duration
}

// inHand is everything one message needs on its way, in one allocation:
// its try, its handler call's context and the [Message] the handler gets.
type inHand[T any] struct {
	t    try
	call handlerCall
	m    Message[T]
}

// process takes one received message to its end: handled and deleted,
// released for a retry, poisoned, released at once at shutdown, or lost to
// another receiver.
func (l *Listener[T]) process(s *session, w work) {
	// The slot is given back last: a message in hand is counted in
	// InFlight until then, and capacity never shows more.
	defer w.slots.Give(1)
	l.stats.inFlight.Add(1)
	defer l.stats.inFlight.Add(-1)
	h := &inHand[T]{}
	t := &h.t
	d := w.d
	t.s, t.d, t.origin, t.received = s, d, d.Receipt, w.received
	t.hidden(w.received, w.received.Add(w.took), l.opts.VisibilityTimeout)
	t.ctx, t.end = context.WithCancelCause(s.detached)
	s.watch.addTry(t)
	settled := false
	defer func() {
		if !settled {
			// The handler called runtime.Goexit, which ends this
			// goroutine whatever it does: settle the message on its way
			// out, as a failed call.
			l.settle(t, l.judge(t, t.ctx, errHandlerExited))
			l.givePayload(t)
		}
	}()
	a := l.work(h, w.turn)
	settled = true
	l.settle(t, a)
	l.givePayload(t)
}

// errHandlerExited is the failure of a handler that called runtime.Goexit
// instead of returning (as testing's FailNow does).
var errHandlerExited = errors.New("azdispatch: the handler ended its goroutine (runtime.Goexit) without returning")

// work does what the message asks and says what should become of it: a
// pointer is resolved first, a batch runs its items, anything else is
// decoded and handed to the handler, at turn under a rate limit.
func (l *Listener[T]) work(h *inHand[T], turn time.Time) action {
	t := &h.t
	d := t.d
	msg, err := wire.Parse(d.Text, l.limits.PointerLimits())
	switch l.memo.Settled(d.ID, d.Text) {
	case memo.Handled:
		// Handled before, but its delete failed: delete it now (and its
		// payload blob, if any, after it), and do not count this delivery
		// against it.
		t.blob = l.ownPayload(msg.Pointer)
		return action{kind: actDone, handledBefore: true}
	case memo.Poisoned:
		// Copied to the poison queue before, but not deleted: finish the
		// move. Its payload blob stays, for the envelope.
		return action{kind: actDone, poisonedBefore: true}
	}
	if errors.Is(err, wire.ErrBadDueLine) {
		return poison(err.Error())
	}
	if due := msg.Due; due != nil {
		if a, done := l.whenDue(t, due); done {
			return a
		}
		if due.Occ != nil {
			if a, dup := l.deliverOnce(t, due.Occ, msg.Pointer); dup {
				return a
			}
		} else if !due.Kept(l.hop) {
			if a, cancelled := l.deliverOrCancel(t, msg.Pointer); cancelled {
				return a
			}
		}
	}
	// Measured once it is a delivery: not a hop, a cancelled message or a
	// duplicate of an occurrence.
	l.measureWait(t, msg.Due)
	if d.DequeueCount > l.opts.MaxDequeueCount {
		// Its earlier tries never reported back (a crash, a lost delete):
		// poison it without trying again.
		return poison(fmt.Sprintf("dequeued %d times, more than MaxDequeueCount %d", d.DequeueCount, l.opts.MaxDequeueCount))
	}
	if errors.Is(err, wire.ErrBadMetadata) {
		return poison(err.Error())
	}
	t.meta = senderMetadata(msg.Meta.Pairs()) // the IDs Requeue added are the envelope's, not the handler's
	text := msg.Body
	if p := msg.Pointer; p != nil || err != nil {
		switch {
		case err != nil:
			return poison(err.Error())
		case l.opts.Payloads == nil:
			return poison(fmt.Sprintf("payload %s cannot be read: %v: %s has no payload store (see PayloadStorer); set ListenerOptions.Payloads",
				p.Blob, ErrNoBlobService, l.src.Name()))
		case p.Container != "" && p.Container != l.opts.Payloads.Container():
			// Read from the listener's own container only, whatever a
			// pointer says: this one was written for another.
			return poison(fmt.Sprintf("%v: payload %s was written to container %q; this listener reads payloads from %q (ListenerOptions.Payloads)",
				ErrInvalidPointer, p.Blob, p.Container, l.opts.Payloads.Container()))
		case p.Kind == wire.KindBatch:
			return l.runBatch(t, p, turn)
		}
		// Room for the blob and the text it inflates to; once the text is
		// out, it alone is kept, until the message is settled.
		if err := l.takePayload(t, p.Size+int64(l.limits.MaxItemSize)); err != nil {
			return l.judge(t, t.ctx, err)
		}
		f, err := l.fetch(t, p)
		if err == nil {
			text, err = payload.SingleText(f.data, l.limits)
		}
		if err != nil {
			return l.payloadFailed(t, err)
		}
		f = nil
		l.shrinkPayload(t, int64(len(text)))
		t.blob = p
	}
	m := &h.m
	if err := l.decode(text, &m.Body); err != nil {
		return poison(decodeFailed(err))
	}
	m.ID, m.DequeueCount, m.InsertedAt, m.Queue, m.TimeInQueue = d.ID, d.DequeueCount, d.InsertedAt, d.Queue, t.waited
	if due := msg.Due; due != nil && due.Occ != nil {
		m.Occurrence = occurrenceOf(due.Occ)
	}
	// A message waits here for its turn under a rate limit, then, hidden
	// and renewed, while batch items hold every handler token; its
	// HandlerTimeout starts once it has one.
	if err := l.waitTurn(t, turn); err != nil {
		return l.judge(t, t.ctx, err)
	}
	if err := l.takeHandler(t); err != nil {
		return l.judge(t, t.ctx, err)
	}
	defer l.giveHandler()
	return l.runHandler(t, &h.call, m, len(text))
}

// whenDue handles the due line of t's message: a message received more
// than a visibility timeout (at most 30 s) before it is due is hidden
// again (done, with the action); one due sooner is held here until then,
// kept hidden by the receive that brought it and the usual renewals,
// rather than hidden again by another request; and one that is due has
// its DequeueCount set to its real tries.
//
// Deliveries before the due time are hops, not tries. The line's Seen is
// the service's dequeue count at the last hop, so a delivery's real count
// is its count less Seen. A hop whose update failed is not in Seen: its
// message reappears a visibility timeout later, and an early delivery held
// here is the first real try whatever the counts say. A failed hop can
// still count as one try: when no listener receives the message again
// before it is due (a hop is made for anything due beyond 30 s, so a
// visibility timeout longer than that may bring it back late), and for
// the tries after a held one whose handler failed.
func (l *Listener[T]) whenDue(t *try, due *wire.DueLine) (action, bool) {
	d := t.d
	if due.Seen > 0 && due.Seen >= d.DequeueCount {
		// Seen is the count at a hop, before this delivery: a line that
		// says otherwise would keep a failing message from its poisoning.
		return poison(fmt.Sprintf("%v: \"seen\" %d is not below the dequeue count %d", wire.ErrBadDueLine, due.Seen, d.DequeueCount)), true
	}
	dueAt := due.Due(d.InsertedAt)
	wait := dueAt.Sub(l.receivedAt(d))
	if wait <= 0 {
		d.DequeueCount = max(d.DequeueCount-due.Seen, 1)
		return action{}, false
	}
	if wait > min(l.opts.VisibilityTimeout, maxHold) {
		return hideAgain(d, due, min(wait, l.hop)), true
	}
	ctx, done := t.untilRunEnds()
	var held bool
	var left func() time.Duration
	if l.records != nil && l.records.Known() {
		// On the source's clock, as the record store keeps it (the
		// service's, carried forward from a Date that is a lower bound:
		// never early; a memqueue's, manual in a test, which the hold
		// waits for rather than the local clock).
		held = l.records.Sleep(ctx, dueAt, nil)
		left = func() time.Duration { return dueAt.Sub(l.records.Now()) }
	} else {
		// A span counted from now on the local clock, which is after
		// the answer whose Date it was measured from: never early.
		until := time.Now().Add(wait)
		held = syncx.Sleep(ctx, time.Until(until), nil)
		left = func() time.Duration { return time.Until(until) }
	}
	done()
	if !held {
		// Stopping, or the try ended: hidden again for what remains, so
		// that this delivery does not count as a try.
		return hideAgain(d, due, max(left(), time.Second)), true
	}
	d.DequeueCount = 1
	return action{}, false
}

// measureWait sets t's time in queue, and counts it in State.TimeInQueue
// if this is the message's first delivery. due is its due line, if any.
func (l *Listener[T]) measureWait(t *try, due *wire.DueLine) {
	d := t.d
	if d.InsertedAt.IsZero() {
		return // a source of one's own that does not say: not known
	}
	t.waited = timeInQueue(d, due, l.receivedAt(d))
	if d.DequeueCount == 1 {
		l.stats.timeInQueue.Add(time.Now(), t.waited)
	}
}

// timeInQueue is how long d waited in its queue before it was received
// (or peeked) at received: from when it first became visible (its
// insertion, or its due time if it was sent for later), both by the
// service's clock.
func timeInQueue(d *Delivery, due *wire.DueLine, received time.Time) time.Duration {
	from := d.InsertedAt
	if due != nil {
		if at := due.Due(d.InsertedAt); at.After(from) {
			from = at
		}
	}
	return max(received.Sub(from), 0)
}

// maxHold bounds how long a listener holds a message that is due soon,
// taking a place a ready message could use: one due later is hidden again.
const maxHold = 30 * time.Second

// hideAgain is the action for d, a delayed message received before it is
// due by the service's clock: hidden again for after (what remains, at
// most 7 days), its due line counting the hop and the service's dequeue count
// so far, so that this delivery is not taken for a try.
func hideAgain(d *Delivery, due *wire.DueLine, after time.Duration) action {
	next := *due
	next.Hops++
	next.Seen = d.DequeueCount
	return action{kind: actHide, after: after, text: next.Encode() + bodyText(d.Text)}
}

// deliverOrCancel decides, for a message with a due line that is due now,
// between its delivery and a [Publisher.Cancel] made while listeners hid it
// again: whoever writes the message's cancel record first wins (If-None-Match:
// *), and the record says which won to the other and to a second cancel.
// A cancelled message is deleted unhandled, with its payload blob, and its
// record kept only until a sweep. Without a payload store there is no
// record to find, and the message is delivered. ptr is its payload
// pointer, if it has one.
func (l *Listener[T]) deliverOrCancel(t *try, ptr *wire.Pointer) (action, bool) {
	store := l.opts.Payloads
	if store == nil {
		return action{}, false
	}
	d := t.d
	name := cancelRecord(d.Queue, d.ID)
	// As long as the message could live (a cancel reads it till then), or
	// deliveredRecordLife for one that never expires.
	meta := payload.Meta{Kind: payload.KindCancel, State: payload.StateDelivered, Queue: d.Queue, Created: l.receivedAt(d)}
	meta.Expires = meta.Created.Add(deliveredRecordLife)
	if d.ExpiresAt.Before(neverExpires) {
		meta.Expires = meta.Created.Add(max(d.ExpiresAt.Sub(meta.Created), 0))
	}
	rec, created, err := store.createRecord(t.ctx, name, meta)
	if err == nil && !created && (rec.meta.State == payload.StateCancelled || rec.meta.State == payload.StateUndetermined) {
		t.blob = l.ownPayload(ptr)
		return action{kind: actCancelled, record: rec}, true
	}
	if err != nil {
		// Not known whether it was cancelled: not delivered either, until
		// a later try can tell (one that keeps failing ends poisoned, as
		// for an unreadable payload).
		l.storageFailed(err)
		if t.ctx.Err() != nil {
			return l.interrupted(t), true
		}
		return action{kind: actRetry, err: fmt.Errorf("cannot tell whether it was cancelled: %w", err), why: causeStorage}, true
	}
	return action{}, false
}

// deliveredRecordLife is how long the delivered record of a message that
// never expires is kept: a cancel of it later than that after its due time
// cannot tell whether it was delivered, and says so
// ([ErrCancelUndetermined]).
const deliveredRecordLife = 30 * 24 * time.Hour

// ownPayload is p if it names a blob of this listener's payload
// container: the blob to delete with its message. A pointer to another
// container names nothing to delete.
func (l *Listener[T]) ownPayload(p *wire.Pointer) *wire.Pointer {
	if p == nil || l.opts.Payloads == nil || p.Container != "" && p.Container != l.opts.Payloads.Container() {
		return nil
	}
	return p
}

// receivedAt is when d was received by the service's clock, or by the
// local clock if its source cannot tell.
func (l *Listener[T]) receivedAt(d *Delivery) time.Time {
	if d.ReceivedAt.IsZero() {
		return l.clock()
	}
	return d.ReceivedAt
}

// bodyText is a message's text without its due line, if any: what a
// poison envelope keeps (a message requeued from there is not delayed
// again), and where its metadata and pointer are read.
func bodyText(text string) string {
	_, rest, _ := wire.CutDue(text) // text itself if its line is malformed
	return rest
}

// decode runs the codec, which may run user code (a type's UnmarshalJSON)
// on untrusted input: a panic there poisons the message, not the process.
func (l *Listener[T]) decode(text string, body *T) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("codec panicked: %v", v)
		}
	}()
	return l.opts.Codec.Decode(text, body)
}

// takeHandler waits for one unit of the listener's handler semaphore,
// which single messages and the items of batches share. It fails with
// errNotStarted when Run's context ends first, or with the try's cause; a
// unit it got then is given back.
func (l *Listener[T]) takeHandler(t *try) error {
	if !l.handlers.TryAcquire(1) {
		// Only a wait makes a context of its own: it ends with the try's
		// or with Run's.
		ctx, done := t.untilRunEnds()
		err := l.handlers.Acquire(ctx, 1)
		done()
		if err != nil {
			if t.ctx.Err() != nil {
				return context.Cause(t.ctx)
			}
			return errNotStarted
		}
	}
	switch {
	case t.s.run.Err() != nil:
		l.giveHandler()
		return errNotStarted
	case t.ctx.Err() != nil:
		l.giveHandler()
		return context.Cause(t.ctx)
	}
	return nil
}

// waitTurn waits for a handler call's turn under the rate limit, if there
// is one: turn, booked at the message's receive for its first call, or,
// if turn is zero, a turn of its own (a batch's further items). It fails
// as takeHandler does. The turn is not kept in the try, whose size is
// what every message allocates.
func (l *Listener[T]) waitTurn(t *try, turn time.Time) error {
	if l.gate == nil {
		return nil
	}
	ctx, done := t.untilRunEnds()
	defer done()
	var err error
	if !turn.IsZero() {
		syncx.Sleep(ctx, time.Until(turn), nil)
		err = ctx.Err()
	} else {
		err = l.opts.RateLimit.Wait(ctx)
	}
	switch {
	case err == nil:
		return nil
	case t.ctx.Err() != nil:
		return context.Cause(t.ctx)
	case t.s.run.Err() != nil:
		return errNotStarted
	}
	return wrapf(err, "rate limit")
}

// takePayload reserves n bytes of the listener's payload budget for t,
// waiting while they are spent. It fails with the try's cause if the try
// ends, or with errNotStarted if Run's context ends, while it waits.
func (l *Listener[T]) takePayload(t *try, n int64) error {
	got, ok := l.budget.TryTake(n)
	if !ok {
		ctx, done := t.untilRunEnds()
		var err error
		got, err = l.budget.Take(ctx, n)
		done()
		if err != nil {
			if t.ctx.Err() != nil {
				return context.Cause(t.ctx)
			}
			return errNotStarted
		}
	}
	t.payloadHeld += got
	return nil
}

// shrinkPayload gives back what t holds of the budget beyond keep bytes: a
// downloaded message keeps only its text once the blob's bytes are let go.
func (l *Listener[T]) shrinkPayload(t *try, keep int64) {
	if extra := t.payloadHeld - max(keep, 0); extra > 0 {
		t.payloadHeld -= extra
		l.budget.Give(extra)
	}
}

// givePayload gives back everything t holds of the budget.
func (l *Listener[T]) givePayload(t *try) { l.shrinkPayload(t, 0) }

// giveHandler gives back what takeHandler took.
func (l *Listener[T]) giveHandler() { l.handlers.Release(1) }

// untilRunEnds returns a context that ends with the try's or with Run's,
// for a wait that either ends; done releases it.
func (t *try) untilRunEnds() (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(t.ctx)
	stop := context.AfterFunc(t.s.run, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// hidden records that t's message was hidden for vis by a request made
// between start and end: a receive, or a renewal.
func (t *try) hidden(start, end time.Time, vis time.Duration) {
	t.hiddenUntil.Store(start.Add(vis).UnixNano())
	t.visibleBy.Store(dueBy(end, vis).UnixNano())
}

// hiddenAtLeast is the earliest t's message may reappear unless it is
// settled.
func (t *try) hiddenAtLeast() time.Time { return time.Unix(0, t.hiddenUntil.Load()) }

// reappearsBy is the latest t's message reappears unless it is settled.
func (t *try) reappearsBy() time.Time { return time.Unix(0, t.visibleBy.Load()) }

// runHandler calls the handler for m, a single message decoded from size
// bytes of text, and judges its result.
func (l *Listener[T]) runHandler(t *try, c *handlerCall, m *Message[T], size int) action {
	return l.judge(t, c, l.callHandler(t, c, m, size))
}

// callHandler calls the handler for m, a message or a batch item decoded
// from size bytes of text, through the middleware if any, with c as its
// context, watched for HandlerTimeout.
func (l *Listener[T]) callHandler(t *try, c *handlerCall, m *Message[T], size int) error {
	t.s.watch.startCall(t, c)
	defer t.s.watch.endCall(t, c) // deferred: a handler may end its goroutine
	start := time.Now()
	err := l.handle(c, t, m, size)
	end := time.Now()
	l.stats.handlerTime.Add(end, end.Sub(start))
	if err != nil && c.timedOut.Load() {
		err = fmt.Errorf("%w after %v: %w", ErrHandlerTimeout, l.opts.HandlerTimeout, err)
	}
	return err
}

// call runs the handler, turning a panic into a [*PanicError].
func (l *Listener[T]) call(ctx context.Context, m *Message[T]) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return l.handler(ctx, m)
}

// onceLife is how long the mark of a delivered occurrence is kept: a
// duplicate of it sent later than that (by a scheduler paused for a week)
// would be delivered.
const onceLife = MaxVisibility

// deliverOnce decides, for a message a [Scheduler] sent for occurrence
// occ, whether it is the occurrence's message or a duplicate: the first
// delivery of any message of that occurrence and item writes the mark
// (If-None-Match: *) with its message ID, and a delivery that finds the
// mark of another message is a duplicate, deleted unhandled. A message
// delivered again (its handler failed, or its delete) finds its own mark.
// Without a record store there is no mark to find, and every message is
// delivered. ptr is the message's payload pointer, if it has one.
func (l *Listener[T]) deliverOnce(t *try, occ *wire.Occurrence, ptr *wire.Pointer) (action, bool) {
	if l.records == nil {
		return action{}, false
	}
	d := t.d
	mark := &records.Record{Kind: payload.KindOnce, Value: []byte(d.ID), Life: onceLife}
	err := l.records.Write(t.ctx, occ.Once, mark)
	if errors.Is(err, records.ErrChanged) {
		var r *records.Record
		if r, err = l.records.Read(t.ctx, occ.Once); err == nil && string(r.Value) != d.ID {
			t.blob = l.ownPayload(ptr)
			return action{kind: actDuplicate}, true
		}
	}
	if err != nil {
		// Not known whether another message of the occurrence was
		// delivered: not delivered either, until a later try can tell.
		l.storageFailed(err)
		if t.ctx.Err() != nil {
			return l.interrupted(t), true
		}
		return action{kind: actRetry, err: fmt.Errorf("cannot tell whether occurrence %s of schedule %q was delivered: %w",
			time.Unix(occ.At, 0).UTC().Format(time.RFC3339), occ.Schedule, err), why: causeStorage}, true
	}
	return action{}, false
}

// dropDuplicate deletes a duplicate of an occurrence's message, then its
// payload blob, if any.
func (l *Listener[T]) dropDuplicate(ctx context.Context, t *try) {
	if l.deleteUnhandled(ctx, t, &l.stats.duplicates, "a duplicate of a scheduled occurrence could not be deleted; it reappears, and is found a duplicate again") {
		l.msgLog(t.d).Info("deleted a duplicate of a scheduled occurrence, unhandled")
	}
}

// occurrenceOf is what a handler sees of the occurrence a due line names.
func occurrenceOf(o *wire.Occurrence) *Occurrence {
	return &Occurrence{Schedule: o.Schedule, At: time.Unix(o.At, 0).UTC(), Late: o.Late, Missed: o.Missed, Item: o.Item}
}
