package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/memo"
	"github.com/azdispatch/azdispatch/internal/track"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// actionKind is what becomes of a message, or of a batch item.
type actionKind int

const (
	// actDone: the work is done. A message is deleted (then its payload
	// blob); an item is marked done in its batch's checkpoint.
	actDone actionKind = iota
	// actRetry: try again later. A message is hidden for the retry delay;
	// an item stays undone, for its batch's next delivery.
	actRetry
	// actPoison: give up. The message, or the item alone, goes to the
	// poison queue with the action's reason.
	actPoison
	// actReappearNow: not tried, or cut off by the drain: a message is made
	// visible at once, so that another listener takes it now.
	actReappearNow
	// actLost: another receiver owns the message now; nothing to do.
	actLost
	// actReappearWhenDue: a delayed message received before it is due: hidden again,
	// with the action's text, for its after, without a try.
	actReappearWhenDue
	// actCancelled: a delayed message cancelled while it waited: deleted
	// unhandled, with its payload blob and its cancel record.
	actCancelled
	// actDuplicate: a scheduled message whose occurrence another message
	// delivered: deleted unhandled.
	actDuplicate
	// actSnooze: not yet (the handler's Snooze, or a key at its limit):
	// hidden again for the action's after, without a try.
	actSnooze
)

// action is the outcome of a try: what to do, and why.
type action struct {
	kind           actionKind
	reason         string        // actPoison: the poison envelope's reason; actDone, poisonedBefore: the earlier delivery's
	err            error         // actRetry: the failure, for the log
	why            retryCause    // actRetry: its cause, as State.RetriedFor counts it
	handledBefore  bool          // actDone: handled on an earlier delivery whose delete failed
	poisonedBefore bool          // actDone: copied to the poison queue on an earlier delivery whose delete failed
	after          time.Duration // actReappearWhenDue, actSnooze: how long to hide it
	text           string        // actReappearWhenDue: its text from now on
	record         *record       // actCancelled: its cancel record
}

func poison(reason string) action { return action{kind: actPoison, reason: reason} }

// judge turns a handler's result into what becomes of the message or batch
// item it ran for; call is the context the handler ran with. It is the one
// place where the outcome rules live, for single messages and batch items
// alike: nil is done; a call that never started is released at once; a call
// cut short with its whole try (ownership lost, the drain) is not this
// call's failure; [Snooze] puts it back without a try; [Permanent] poisons
// at once; any other
// error, panic or the handler's own timeout is a failure, retried until the
// message's last try, which poisons it.
func (l *Listener[T]) judge(t *try, call context.Context, err error) action {
	switch {
	case err == nil:
		return action{kind: actDone}
	case errors.Is(err, errNotStarted):
		return action{kind: actReappearNow}
	case t.ended() && call.Err() != context.DeadlineExceeded:
		return l.interrupted(t)
	}
	if se := (*SnoozeError)(nil); errors.As(err, &se) {
		return action{kind: actSnooze, after: se.For}
	}
	l.failed(t.d, err)
	if errors.As(err, new(*PermanentError)) {
		return poison(err.Error())
	}
	if t.d.DequeueCount >= l.opts.MaxDequeueCount {
		// Its last try: poison now rather than at the next delivery, which
		// would cost a release, a receive and the retry delay.
		return poison(fmt.Sprintf("failed %d times; last error: %v", t.d.DequeueCount, err))
	}
	return action{kind: actRetry, err: err, why: causeOf(err)}
}

// causeOf is the cause of a retry after a handler call failed with err.
func causeOf(err error) retryCause {
	switch {
	case errors.As(err, new(*PanicError)):
		return causePanic
	case errors.Is(err, ErrHandlerTimeout):
		return causeTimeout
	}
	return causeError
}

// interrupted is the action for a try whose context ended from outside the
// call that reports it.
func (l *Listener[T]) interrupted(t *try) action {
	switch cause := t.cause(); {
	case errors.Is(cause, ErrOwnershipLost):
		return action{kind: actLost}
	case errors.Is(cause, ErrDrainTimeout):
		return action{kind: actReappearNow}
	default: // a message's handler timed out
		return action{kind: actRetry, err: cause, why: causeTimeout}
	}
}

// payloadFailed is the action for a message whose payload blob could not be
// read. A missing, corrupt or oversized payload is poisoned (its blob, if
// any, kept and marked); a failed request is retried after the retry delay,
// like a failed handler, so that a payload that stays unreadable ends
// poisoned too (dequeued too often).
func (l *Listener[T]) payloadFailed(t *try, err error) action {
	l.storageFailed(err)
	switch {
	case errors.Is(err, ErrPayloadMissing), errors.Is(err, ErrPayloadCorrupt), errors.Is(err, ErrMessageTooLarge):
		return poison(limitOption(err, "ListenerOptions").Error())
	case t.ended():
		return l.interrupted(t)
	}
	return action{kind: actRetry, err: fmt.Errorf("cannot read the payload: %w", err), why: causeStorage}
}

// fetch reads the payload blob p names for t, recording how storage answered.
func (l *Listener[T]) fetch(t *try, p *wire.Pointer) (*fetched, error) {
	f, err := l.opts.Payloads.Store.fetch(t.context(), p)
	if err == nil {
		l.storageSucceeded(opBlobRead)
	}
	return f, err
}

// failed counts a failed handler call, logging a panic with its stack.
func (l *Listener[T]) failed(d *Delivery, err error, attrs ...any) {
	l.stats.failed.Add(1)
	var pe *PanicError
	if errors.As(err, &pe) {
		l.stats.panics.Add(1)
		l.msgLog(d).Error("handler panicked", append(attrs, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))...)
	}
}

// settle carries out a message's action once its try is over.
func (l *Listener[T]) settle(t *try, a action) {
	handled := a.kind == actDone && !a.handledBefore && !a.poisonedBefore
	lost := l.leaveWatch(t, handled)
	t.end(nil)
	ctx := t.s.settle.Get()
	if lost || a.kind == actLost {
		t.s.watch.removeTry(t)
		t.save(ctx)
		l.stats.lost.Add(1)
		l.expectReappearance(t)
		l.msgLog(t.d).Warn("ownership lost while handling; the message will be delivered again")
		return
	}
	switch a.kind {
	case actDone:
		l.deleteDone(ctx, t, a, handled)
	case actPoison:
		l.poisonMessage(ctx, t, a.reason)
	case actReappearNow:
		t.save(ctx)
		l.count(l.reappearIn(ctx, t.d, 0, t.reappearsNoLater()), &l.stats.released)
	case actReappearWhenDue:
		t.d.Text = a.text
		l.count(l.reappearIn(ctx, t.d, a.after, t.reappearsNoLater()), &l.stats.rehidden)
	case actCancelled:
		l.dropCancelled(ctx, t, a.record)
	case actDuplicate:
		l.dropDuplicate(ctx, t)
	case actSnooze:
		t.save(ctx)
		l.snooze(ctx, t, a.after)
	case actRetry:
		t.save(ctx)
		l.msgLog(t.d).Info("retrying later", "err", a.err)
		if l.trackToken(t) != "" { // the reason formatted only for a tracked message
			_ = l.trackMove(ctx, t, track.Failed, fmt.Sprint(a.err), true)
		}
		l.reappearForRetry(ctx, t, a.why)
	}
}

// leaveWatch stops t's renewals, if they started, and reports whether
// ownership was lost. A handled message stays in the watch while it is
// deleted (see watch.settling); any other leaves it now.
//
// A success is remembered before its delete has failed, not after: a
// delete the SDK retries against a throttled account may outlast the
// visibility timeout, and the message, back meanwhile, is then only
// deleted. It is remembered at once if the message has been in hand long
// enough for renewals (and when ownership was lost), and otherwise by the
// watch if the delete is still under way when the first renewal would have
// come due; a delete done before then costs the memo nothing.
func (l *Listener[T]) leaveWatch(t *try, handled bool) (lost bool) {
	if !handled {
		if r := t.s.watch.removeTry(t); r != nil {
			return r.stop()
		}
		return false
	}
	r, late := t.s.watch.settling(t)
	if r != nil {
		lost = r.stop()
	}
	if late {
		l.memo.Remember(t.d.ID, t.d.Text, memo.Handled, t.resultNote())
	}
	return lost
}

// deleteDone deletes a message whose work is done (then its payload blob),
// handled now or on an earlier delivery.
//
// A group's child is finished in its group first (see finishGroup): if that
// fails, the message is kept, as if its delete had failed, and its next
// delivery finishes it and deletes it.
func (l *Listener[T]) deleteDone(ctx context.Context, t *try, a action, handled bool) {
	d := t.d
	why := "its group or status could not record it; it reappears, is recorded and deleted"
	err := l.finishGroup(ctx, t, a.poisonedBefore, a.reason)
	if err == nil {
		end := track.Succeeded
		if a.poisonedBefore {
			end = track.Poisoned
		}
		err = l.trackMove(ctx, t, end, a.reason, false)
	}
	if err == nil {
		why = ""
		if err = l.srcDelete(ctx, d); err != nil {
			l.storageFailed(err)
			why = deleteFailed(err)
		}
	}
	if handled {
		// From here the watch remembers nothing more of it: a success is
		// forgotten below, a failure remembered.
		t.s.watch.removeTry(t)
	}
	if err != nil {
		if handled {
			l.memo.Remember(d.ID, d.Text, memo.Handled, t.resultNote())
		}
		// Record what is done, so the next delivery only deletes.
		t.save(ctx)
		l.stats.lost.Add(1)
		l.expectReappearance(t)
		l.msgLog(d).Warn(why, "err", err)
		return
	}
	l.storageSucceeded(OpDelete)
	l.memo.Forget(d.ID)
	switch {
	case a.poisonedBefore:
		l.stats.poisoned.Add(1)
		l.stats.handledBefore.Add(1)
		l.msgLog(d).Info("deleted a message copied to the poison queue on an earlier delivery")
		return
	case a.handledBefore:
		l.stats.handledBefore.Add(1)
	}
	l.stats.succeeded.Add(1)
	if t.blob != nil {
		l.removePayload(ctx, d, t.blob)
	}
}

// dropCancelled deletes a message cancelled while it waited, then its
// payload blob, and marks its cancel record expired: the message first, so
// that a crash in between leaves a blob and a record (which Sweep
// removes), never a message without its record, which would then be
// handled. The record stays until a sweep so that a second cancel still
// says ErrAlreadyCancelled.
func (l *Listener[T]) dropCancelled(ctx context.Context, t *try, rec *record) {
	d := t.d
	if !l.deleteUnhandled(ctx, t, &l.stats.cancelled, "a cancelled message could not be deleted; it reappears, and is found cancelled again") {
		return
	}
	_ = l.trackMove(ctx, t, track.Cancelled, "", true)
	if err := l.opts.Payloads.Store.expireRecord(ctx, rec); err != nil {
		l.msgLog(d).Warn("cancelled message deleted; its cancel record stays until it expires with the message", "err", err)
	}
	l.msgLog(d).Info("deleted a message cancelled while it waited, unhandled")
}

// ownPayload is p if it names a blob of this listener's payload
// container: the blob to delete with its message. A pointer to another
// container names nothing to delete.
func (l *Listener[T]) ownPayload(p *wire.Pointer) *wire.Pointer {
	if p == nil || l.opts.Payloads.Store == nil || p.Container != "" && p.Container != l.opts.Payloads.Store.Container() {
		return nil
	}
	return p
}

// resultNote is the result t's handler left for its group (see
// SetGroupResult), as the memo keeps it; "" if none.
func (t *try) resultNote() string {
	if r := t.result.Load(); r != nil {
		return string(*r)
	}
	return ""
}

// save records a batch's progress, if the try is a batch's.
func (t *try) save(ctx context.Context) {
	if t.saveProgress != nil {
		t.saveProgress(ctx)
	}
}

// poisonMessage copies t's message into the poison queue with reason, then
// deletes it. If the copy fails the message stays where it is (released for
// a retry delay), so that it is never in neither queue. A pointer's blob is
// first marked as poisoned, so that [Sweep] keeps it for the envelope.
func (l *Listener[T]) poisonMessage(ctx context.Context, t *try, reason string) {
	d := t.d
	log := l.msgLog(d).With("reason", reason)
	err := l.keepPayload(ctx, d)
	if err == nil {
		err = l.sendPoison(ctx, d, t.origin, newPoisonEnvelope(l.src.Name(), d, reason, time.Now()))
	}
	if err != nil {
		l.storageFailed(err)
		l.stats.poisonErrors.Add(1)
		log.Error("cannot move the message to the poison queue; it stays in its queue", "err", err)
		l.reappearForRetry(ctx, t, causePoison)
		return
	}
	l.storageSucceeded(OpSend)
	// Remembered before the delete, as a success is: its next delivery
	// here is deleted, not poisoned again, whenever it comes. Another
	// listener would poison it again, and Requeue skips such a duplicate.
	l.memo.Remember(d.ID, d.Text, memo.Poisoned, reason)
	err = l.finishGroup(ctx, t, true, reason)
	if err == nil {
		err = l.trackMove(ctx, t, track.Poisoned, reason, false)
	}
	if err != nil {
		l.stats.lost.Add(1)
		l.expectReappearance(t)
		log.Warn("copied to the poison queue, but its group or status could not record it; its next delivery records it and is deleted", "err", err)
		return
	}
	if err := l.srcDelete(ctx, d); err != nil {
		l.storageFailed(err)
		l.stats.lost.Add(1)
		l.expectReappearance(t)
		log.Warn("copied to the poison queue but not deleted; its next delivery is only deleted", "err", err)
		return
	}
	l.memo.Forget(d.ID)
	l.stats.poisoned.Add(1)
	log.Warn("message poisoned")
}

// sendPoison writes env, for d, to the poison queue. A body too large for
// an envelope is offloaded.
func (l *Listener[T]) sendPoison(ctx context.Context, d *Delivery, origin any, env *PoisonEnvelope) error {
	text, err := envelopeText(ctx, env, l.opts.Payloads.Store, l.limits)
	if err != nil {
		return err
	}
	return l.poisonSend(ctx, d, env, text, origin)
}

// sendEnvelope puts an envelope's text on the poison queue: beside the
// queue its message came from when the poison queue is a sharded queue's
// (see [ShardedQueue.PoisonQueue]), which origin, the delivery's receipt as
// received, tells.
func (l *Listener[T]) sendEnvelope(ctx context.Context, origin any, text string) error {
	opts := &SendOptions{TTL: -1}
	var err error
	if l.poison.sendBeside != nil {
		_, err = l.poison.sendBeside(ctx, origin, text, opts)
	} else {
		_, err = l.opts.PoisonQueue.Send(ctx, text, opts)
	}
	return err
}

// removePayload deletes the blob of a message that has been deleted: the
// message first, so that a crash in between leaves waste (which [Sweep]
// removes), never a pointer to nothing.
func (l *Listener[T]) removePayload(ctx context.Context, d *Delivery, p *wire.Pointer) {
	if err := l.opts.Payloads.Store.remove(ctx, p.Blob); err != nil {
		l.msgLog(d).Warn("message deleted, but not its payload blob; Sweep will remove it", "blob", p.Blob, "err", err)
	}
}

// keepPayload marks the blob of a pointer message that is being poisoned, so
// that [Sweep] keeps it for as long as the envelope may be requeued. Text that
// is not a well-formed pointer makes no request. A blob that is missing or
// not ours has nothing to keep; any other failure is returned, and the
// message stays in its queue.
func (l *Listener[T]) keepPayload(ctx context.Context, d *Delivery) error {
	// The format alone decides: a pointer beyond this listener's limits may
	// still be requeued to one with larger limits.
	msg, _ := wire.Parse(d.Text, wire.Limits{})
	p := msg.Pointer
	if p == nil || l.opts.Payloads.Store == nil || p.Container != "" && p.Container != l.opts.Payloads.Store.Container() {
		return nil // not a blob of this listener's container
	}
	err := l.opts.Payloads.Store.markPoisoned(ctx, p.Blob, time.Now())
	if errors.Is(err, ErrPayloadMissing) || errors.Is(err, ErrPayloadCorrupt) {
		return nil
	}
	return err
}

// letGo tells the source, if it asks (a [QueueSet] does), that d is no
// longer in hand: settled, or left to reappear.
func (l *Listener[T]) letGo(d *Delivery) {
	if l.caps.Settled != nil {
		l.caps.Settled(d)
	}
}

// msgLog is the logger for one message's events. It is made only when
// something is logged: most messages log nothing.
func (l *Listener[T]) msgLog(d *Delivery) *slog.Logger {
	return l.log.With("id", d.ID, "dequeue_count", d.DequeueCount)
}

// count records a settled message in c if ok, and as lost otherwise.
func (l *Listener[T]) count(ok bool, c *atomic.Int64) {
	if ok {
		c.Add(1)
	} else {
		l.stats.lost.Add(1)
	}
}

// deleteFailed says what a failed delete of a handled message means, by
// what the service answered: a stale receipt, a message that may be gone,
// or a failure that left it where it was.
func deleteFailed(err error) string {
	switch queueerror.Code(answerOf(err).code) {
	case queueerror.PopReceiptMismatch:
		return "handled, but the delete was refused: the message became visible again and another receive holds it now; " +
			"if it comes back here it is deleted without running the handler"
	case queueerror.MessageNotFound:
		return "handled, but the delete found no such message with this receipt: the receipt is stale (the message became " +
			"visible and another receive holds it), or it was deleted by someone else (or the queue cleared); " +
			"if it comes back here it is deleted without running the handler"
	}
	return "handled, but the delete failed; the message will be delivered again, and deleted without running the handler"
}

// deleteUnhandled deletes t's message, which is not to be handled, then its
// payload blob, and counts it in dropped; it reports whether the delete
// succeeded. A message it could not delete reappears, and is judged again
// (ifFailed says so in the log).
func (l *Listener[T]) deleteUnhandled(ctx context.Context, t *try, dropped *atomic.Int64, ifFailed string) bool {
	d := t.d
	if err := l.srcDelete(ctx, d); err != nil {
		l.storageFailed(err)
		l.stats.lost.Add(1)
		l.expectReappearance(t)
		l.msgLog(d).Warn(ifFailed, "err", err)
		return false
	}
	l.storageSucceeded(OpDelete)
	dropped.Add(1)
	if t.blob != nil {
		l.removePayload(ctx, d, t.blob)
	}
	return true
}

// orderUnrecorded is the end of a handled message its key's order could
// not record (err): snoozed, it runs again unless the record took effect
// after all (an answer lost); deleted, it would hold up the next until
// OrderWait gave it up. A lease lost meanwhile fails every write of this
// delivery (another may hold the key by now): that message is deleted. So
// is one that has run maxReruns times here already: a store that keeps
// refusing the record would have it run again and again.
func (l *Listener[T]) orderUnrecorded(t *try, a action, err error) action {
	if err == nil || a.kind != actDone || a.handledBefore || errors.Is(err, blobs.ErrLeased) {
		return a
	}
	if l.reruns.add(t.d.ID) > maxReruns {
		l.msgLog(t.d).Warn("a handled message its key's order could not record is deleted after running again and again: the next of its key waits for it OrderWait at most",
			"key", t.key, "runs", maxReruns+1, "err", err)
		return a
	}
	l.msgLog(t.d).Warn("a handled message is snoozed, not deleted, since its key's order could not record it: it runs again when it comes back", "key", t.key, "err", err)
	return action{kind: actSnooze, after: l.keySnooze()}
}

// maxReruns bounds how often one handled message whose order is not
// recorded runs again in one listener; maxRerunsKept bounds the messages
// counted (past it, the counts start afresh).
const maxReruns, maxRerunsKept = 3, 1024

// reruns counts, by message ID, the runs again of orderUnrecorded.
type reruns struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts one more for id, and returns its count.
func (r *reruns) add(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil || len(r.n) >= maxRerunsKept {
		r.n = map[string]int{}
	}
	r.n[id]++
	return r.n[id]
}

// storageFailed records a failed storage request of the listener. The first
// fatal error of a kind is logged as an error and reported as [EventFatal];
// the listener goes on trying, and Run returns it after FatalTimeout if set.
func (l *Listener[T]) storageFailed(err error) {
	if err == nil || !l.storageFault(err) {
		return
	}
	l.alerts().Error("storage refuses the listener in a way that will not pass without a change (credential, permissions, the queue); it keeps trying", "err", err)
	l.event(Event{Kind: EventFatal, Err: err})
}

// storageSucceeded records a successful request of kind o, which ends a
// fatal state of that kind.
func (l *Listener[T]) storageSucceeded(o Op) {
	if err := l.health.Succeed(o); err != nil {
		l.log.Info("storage accepts the listener again", "op", o, "was", err)
		l.event(Event{Kind: EventRecovered, Err: err})
	}
}

// storageFault records err in the listener's health, keyed by the kind of
// request that failed; it reports whether a fatal state of that kind began
// (see [StorageError.Fatal]).
func (l *Listener[T]) storageFault(err error) (began bool) {
	var se *StorageError
	fatal := errors.As(err, &se) && se.Fatal()
	var op Op
	if fatal {
		op = se.Op
	}
	return l.health.Fail(op, err, fatal, time.Now())
}
