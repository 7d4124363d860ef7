package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch/internal/keygate"
	"github.com/azdispatch/azdispatch/internal/keylock"
	"github.com/azdispatch/azdispatch/internal/keyorder"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// The stages of a try that decide when, and whether, a message runs: one
// sent for later (held, or hidden again until it is due), cancelled while
// it waited, sent by a Scheduler for an occurrence that is delivered once,
// or waiting for its key, for its turn in the key's order, and for its
// turn under a rate limit.

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
		return reappearWhenDue(d, due, min(wait, l.hop)), true
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
		return reappearWhenDue(d, due, max(left(), time.Second)), true
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
		// Noted as of its receive, by the local clock, as the window
		// reads it: a clock read per message saved.
		l.stats.timeInQueue.Add(t.received, t.waited)
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

// deliverOrCancel decides, for a message with a due line that is due now,
// between its delivery and a [Publisher.Cancel] made while listeners hid it
// again: whoever writes the message's cancel record first wins (If-None-Match:
// *), and the record says which won to the other and to a second cancel.
// A cancelled message is deleted unhandled, with its payload blob, and its
// record kept only until a sweep. Without a payload store there is no
// record to find, and the message is delivered. ptr is its payload
// pointer, if it has one.
func (l *Listener[T]) deliverOrCancel(t *try, ptr *wire.Pointer) (action, bool) {
	store := l.opts.Payloads.Store
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
	rec, created, err := store.createRecord(t.context(), name, meta)
	if err == nil && !created && (rec.meta.State == payload.StateCancelled || rec.meta.State == payload.StateUndetermined) {
		t.blob = l.ownPayload(ptr)
		return action{kind: actCancelled, record: rec}, true
	}
	if err != nil {
		// Not known whether it was cancelled: not delivered either, until
		// a later try can tell (one that keeps failing ends poisoned, as
		// for an unreadable payload).
		l.storageFailed(err)
		if t.ended() {
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

// onceLife is how long the mark of a delivered occurrence is kept: a
// duplicate of it sent later than that (by a scheduler paused for a week)
// would be delivered.
const onceLife = MaxVisibility

// deliverOnce decides, for a message that carries a once-mark's name
// (a [Scheduler]'s for an occurrence, a group's for its continuation),
// whether it is the one to handle or a duplicate: the first delivery of
// any message of that name writes the mark (If-None-Match: *) with its
// message ID, and a delivery that finds the mark of another message is a
// duplicate, deleted unhandled. A message delivered again (its handler
// failed, or its delete) finds its own mark. Without a record store there
// is no mark to find, and every message is delivered. ptr is the
// message's payload pointer, if it has one; what names the message for
// errors.
func (l *Listener[T]) deliverOnce(t *try, once string, ptr *wire.Pointer, what string) (action, bool) {
	if l.records == nil {
		return action{}, false
	}
	d := t.d
	mark := &records.Record{Kind: payload.KindOnce, Value: []byte(d.ID), Life: onceLife}
	err := l.records.Write(t.context(), once, mark)
	if errors.Is(err, records.ErrChanged) {
		var r *records.Record
		if r, err = l.records.Read(t.context(), once); err == nil && string(r.Value) != d.ID {
			t.blob = l.ownPayload(ptr)
			return action{kind: actDuplicate}, true
		}
	}
	if err != nil {
		// Not known whether another message of the name was delivered:
		// not delivered either, until a later try can tell.
		l.storageFailed(err)
		if t.ended() {
			return l.interrupted(t), true
		}
		return action{kind: actRetry, err: fmt.Errorf("cannot tell whether %s was delivered: %w", what, err), why: causeStorage}, true
	}
	return action{}, false
}

// occurrenceName names occurrence o of a schedule in errors.
func occurrenceName(o *wire.Occurrence) string {
	return fmt.Sprintf("occurrence %s of schedule %q", time.Unix(o.At, 0).UTC().Format(time.RFC3339), o.Schedule)
}

// dropDuplicate deletes a duplicate of an occurrence's message, then its
// payload blob, if any.
func (l *Listener[T]) dropDuplicate(ctx context.Context, t *try) {
	if l.deleteUnhandled(ctx, t, &l.stats.duplicates, "a duplicate of a scheduled occurrence could not be deleted; it reappears, and is found a duplicate again") {
		l.msgLog(t.d).Info("deleted a duplicate (of a scheduled occurrence, or of a group's continuation), unhandled")
	}
}

// occurrenceOf is what a handler sees of the occurrence a due line names.
func occurrenceOf(o *wire.Occurrence) *Occurrence {
	return &Occurrence{Schedule: o.Schedule, At: time.Unix(o.At, 0).UTC(), Late: o.Late, Missed: o.Missed, Item: o.Item, RunNow: o.RunNow}
}

// awaitKey takes a place for the message under its key's limit (see
// [LimitOptions]): at once if there is one; else it waits in hand, in line,
// for at most Limits.Wait. With Limits.AcrossInstances a new place needs its
// lease too; a place handed on by a message of the key that finished comes
// with the lease it held. A message that finds its key's line full, waits
// in vain, or cannot take the lease, is snoozed. The place is held until
// the try's stages are over (see leaveKey), not until its message is
// settled: the next of the key may run while this one is deleted.
func (l *Listener[T]) awaitKey(h *inHand[T]) (action, bool) {
	t := &h.t
	if l.keys == nil || t.key == "" {
		return action{}, false
	}
	o, token := keygate.In, any(nil)
	if !l.keys.TryEnter(t.key) {
		ctx, done := t.untilRunEnds()
		ctx, cancel := context.WithTimeout(ctx, l.opts.Limits.Wait)
		var waited bool
		o, waited, token = l.keys.Enter(ctx, t.key)
		cancel()
		done()
		if waited {
			l.stats.keyWaits.Add(1)
		}
	}
	if o == keygate.In {
		t.keyIn = true
		t.keyLock, _ = token.(*keylock.Lock)
		if l.keyLocks == nil || t.keyLock != nil {
			return action{}, false
		}
		// Bounded: a blob service that does not answer snoozes the
		// message rather than hold it.
		ctx, cancel := context.WithTimeout(t.context(), keyTakeWithin)
		lock, err := l.keyLocks.Take(ctx, t.key)
		cancel()
		if err == nil {
			t.keyLock = lock
			return action{}, false
		}
		l.leaveKey(t, actSnooze) // the next in line, if any, takes a lease of its own
		if errors.Is(err, keylock.ErrHeld) {
			l.stats.keysElsewhere.Add(1)
		} else {
			l.storageFailed(storageError(opBlobLease, l.src.Name(), err))
		}
	}
	switch {
	case t.ended():
		return l.interrupted(t), true
	case t.s.run.Err() != nil:
		// Stopping: back at once for another listener, still not a try.
		return action{kind: actSnooze}, true
	}
	return action{kind: actSnooze, after: l.keySnooze()}, true
}

// keySnooze is Limits.Snooze and a jitter of whole seconds (visibility's
// unit: less would be rounded away, and a key's messages come back together).
func (l *Listener[T]) keySnooze() time.Duration {
	s := l.opts.Limits.Snooze
	return s + rand.N(max(s/2, time.Second)/time.Second+1)*time.Second
}

// leaveKey gives back t's place under its key's limit, if it holds one, to
// the first of the key waiting in line, with its lease; with no one
// waiting, the lease is released, from a goroutine of the session's. end
// is how the try ended: with Limits.InOrder, a message handled or poisoned
// is recorded in the key's order first (see orderDone). It returns the
// error of that record, if it could not be written.
func (l *Listener[T]) leaveKey(t *try, end actionKind) (unrecorded error) {
	if !t.keyIn {
		return nil
	}
	if end == actDone || end == actPoison {
		unrecorded = l.orderDone(t, end == actDone)
	}
	t.keyIn = false
	lock := t.keyLock
	t.keyLock = nil
	// The release is noted before the key is free here: the next message
	// of the key waits for it rather than find the lease held.
	var release func(context.Context) error
	kept := func() {
		if lock != nil {
			release = lock.Releasing()
		}
	}
	if l.keys.LeaveOr(t.key, lock, kept) || release == nil {
		return unrecorded
	}
	t.s.handlers.Go(func() {
		// The session's values (the transaction counts among them), not
		// its end: a release is owed even at shutdown.
		ctx, cancel := context.WithTimeout(t.s.detached, keyReleaseWithin)
		defer cancel()
		if err := release(ctx); err != nil {
			l.log.Warn("a key's lease could not be released; it expires", "key", lock.Key(), "err", err)
		}
	})
	return unrecorded
}

const (
	// keyLease is the duration of a key's lease (Limits.AcrossInstances):
	// how long the key of a process that died stays held. Renewals come
	// every third of it.
	keyLease = 30 * time.Second
	// keyTakeWithin bounds the taking of a key's lease (a Put Blob and two
	// Lease Blob requests at most, on a key's first use); keyReleaseWithin
	// its release.
	keyTakeWithin, keyReleaseWithin = 10 * time.Second, 10 * time.Second
	// fleetIdle and fleetHold are how long a place of Limits.Fleet is kept
	// idle, and held at most, before it is given up.
	fleetIdle, fleetHold = time.Second, 30 * time.Second
)

// leaseLost counts a lease lost while held (a key's, or a place of the
// fleet's), and says so.
func (l *Listener[T]) leaseLost(key string, err error) {
	l.stats.leasesLost.Add(1)
	l.alerts().Warn("a lease of Limits was lost while held: another listener may run past the limit meanwhile", "key", key, "err", err)
}

// KeyClass bounds the handler calls of the messages whose key begins with
// Prefix to Fleet at once, across every listener of the source that sets
// it, with blob leases in ListenerOptions.Payloads.Store's container under
// "classes/<source>/", as [LimitOptions.Fleet] does for all calls, at its
// cost: a place is kept while calls keep using it, so that under a steady
// load a call costs no request. A key belongs to the class of the longest
// Prefix it begins with, and to none if none matches; a message without a
// key to none. A call of a class holds its class's place first, then one
// of the listener's handlers, then a place of Fleet's: a class at its
// limit keeps its messages waiting in hand, not the handlers of the
// others. Every listener must set the same classes.
type KeyClass struct {
	// Prefix is how the keys of the class begin; not empty, and at most
	// [MaxKeyLength] bytes.
	Prefix string
	// Fleet is how many handler calls of the class run at once, at
	// least 1.
	Fleet int
}

// maxClasses bounds LimitOptions.Classes: each class is a pool of
// leases, and one key is matched against every prefix.
const maxClasses = 64

// classOf returns the index in classes of the class of key, the longest
// prefix it begins with, or -1.
func classOf(classes []KeyClass, key string) int {
	best := -1
	for i, c := range classes {
		if key != "" && strings.HasPrefix(key, c.Prefix) && (best < 0 || len(c.Prefix) > len(classes[best].Prefix)) {
			best = i
		}
	}
	return best
}

// checkClasses reports the first invalid class of classes.
func checkClasses(classes []KeyClass) error {
	if len(classes) > maxClasses {
		return badListenerOption("Limits.Classes", "%d classes, more than %d", len(classes), maxClasses)
	}
	seen := make(map[string]bool, len(classes))
	for i, c := range classes {
		field := fmt.Sprintf("Limits.Classes[%d]", i)
		switch {
		case c.Prefix == "" || len(c.Prefix) > MaxKeyLength:
			return badListenerOption(field+".Prefix", "%d bytes: not between 1 and %d", len(c.Prefix), MaxKeyLength)
		case seen[c.Prefix]:
			return badListenerOption(field+".Prefix", "%q is the prefix of an earlier class too", c.Prefix)
		case c.Fleet < 1:
			return badListenerOption(field+".Fleet", "%d is less than 1", c.Fleet)
		}
		seen[c.Prefix] = true
	}
	return nil
}

// Order per key (Limits.InOrder): a message runs once the message of its
// key it follows is done. The key's order is kept in its lease blob's
// metadata (internal/keyorder), read and written by the holder of the
// key's one place.

// awaitOrder lets a message that holds its key's place run if the message
// it follows is done, or has stood missing for Limits.OrderWait; otherwise
// it gives the place up and snoozes the message. It runs after awaitKey,
// so the key's lease is held: only its holder reads or writes the order.
func (l *Listener[T]) awaitOrder(h *inHand[T]) (action, bool) {
	t := &h.t
	if !l.opts.Limits.InOrder || t.keyLock == nil {
		return action{}, false
	}
	stamp, ok := keyorder.ParseStamp(t.meta[MetadataOrder])
	if !ok {
		return action{}, false // sent by no publisher of ours: it follows nothing
	}
	ctx, cancel := context.WithTimeout(t.context(), keyTakeWithin)
	defer cancel()
	meta, err := t.keyLock.Meta(ctx)
	if err != nil {
		l.storageFailed(storageError(opBlobRead, l.src.Name(), err))
		return l.orderSnooze(t), true
	}
	state := keyorder.Load(meta)
	if state.Handled(stamp) {
		// A copy of a message handled already (its delete failed, or its
		// handler returned after its timeout, or the answer to its
		// record was lost): deleted, not run after those that follow it.
		t.blob = l.ownPayload(h.msg.Pointer)
		return action{kind: actDone, handledBefore: true}, true
	}
	now := l.receivedAt(t.d) // the service's clock
	v := state.Judge(stamp, now, l.opts.Limits.OrderWait)
	if v.GaveUp {
		l.stats.orderSkips.Add(1)
		l.msgLog(t.d).Warn("the key's order was stuck for OrderWait: the messages it waited for are given up",
			"key", t.key, "follows", stamp.Prev, "wait", l.opts.Limits.OrderWait)
	}
	if v.Changed {
		// When the key got stuck (the wait counts from then), or a gap
		// given up.
		_ = l.saveOrder(ctx, t, state, meta) // if not, the key waits on: it is judged again
	}
	if !v.Run {
		l.stats.orderWaits.Add(1)
		return l.orderSnooze(t), true
	}
	t.order = stamp
	return action{}, false
}

// orderSnooze gives up t's place under its key and snoozes it.
func (l *Listener[T]) orderSnooze(t *try) action {
	l.leaveKey(t, actSnooze)
	if t.ended() {
		return l.interrupted(t)
	}
	return action{kind: actSnooze, after: l.keySnooze()}
}

// orderDone records, as t gives up its key's place, that its message is
// done in the key's order, if it was handled or poisoned: the message
// that follows it may run, and a copy of it delivered again, if it was
// handled, is not (see awaitOrder). One Set Blob Metadata, under the key's
// lease. It returns the error of a record that could not be read or
// written.
func (l *Listener[T]) orderDone(t *try, handled bool) error {
	if t.order.N == 0 || t.keyLock == nil {
		return nil
	}
	stamp := t.order
	t.order = keyorder.Stamp{}
	// The session's values (the transaction counts among them), not the
	// try's end: the message is done whatever ended the try since.
	ctx, cancel := context.WithTimeout(t.s.detached, keyTakeWithin)
	defer cancel()
	meta, err := t.keyLock.Meta(ctx)
	if err != nil {
		l.storageFailed(storageError(opBlobRead, l.src.Name(), err))
		return err
	}
	state := keyorder.Load(meta)
	state.Done(stamp, l.receivedAt(t.d), handled)
	return l.saveOrder(ctx, t, state, meta)
}

// saveOrder writes a key's order to its lease blob, and returns the error
// if it could not.
func (l *Listener[T]) saveOrder(ctx context.Context, t *try, state keyorder.State, meta map[string]string) error {
	err := t.keyLock.SetMeta(ctx, state.Meta(meta))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		// Stopping, or the try ended: nothing the storage did.
		l.msgLog(t.d).Debug("a key's order was not written", "key", t.key, "err", err)
		return err
	case !errors.Is(err, context.DeadlineExceeded):
		l.storageFailed(storageError(opBlobWrite, l.src.Name(), err))
	}
	l.msgLog(t.d).Warn("a key's order could not be written", "key", t.key, "err", err)
	return err
}

// awaitTurn waits for the message's turn under a rate limit. A message
// waits here, hidden and renewed, and then while batch items hold every
// handler token; its HandlerTimeout starts once it has one.
func (l *Listener[T]) awaitTurn(h *inHand[T]) (action, bool) {
	t := &h.t
	if err := l.waitTurn(t, h.turn); err != nil {
		return l.judge(t, t.context(), err), true
	}
	return action{}, false
}

// waitTurn waits for a handler call's turn under the rate limit, if there
// is one: turn, booked at the message's receive for its first call, or,
// if turn is zero, a turn of its own (a batch's further items). It fails
// as takeHandler does.
func (l *Listener[T]) waitTurn(t *try, turn time.Time) error {
	if l.gate == nil || !turn.IsZero() && !time.Now().Before(turn) {
		return nil
	}
	ctx, done := t.untilRunEnds()
	defer done()
	var err error
	if !turn.IsZero() {
		syncx.Sleep(ctx, time.Until(turn), nil)
		err = ctx.Err()
	} else {
		err = l.opts.Scaling.RateLimit.Wait(ctx)
	}
	switch {
	case err == nil:
		return nil
	case t.ended():
		return t.cause()
	case t.s.run.Err() != nil:
		return errNotStarted
	}
	return wrapf(err, "rate limit")
}
