package azdispatch

// Order per key (LimitOptions.InOrder): a message runs once the message of
// its key it follows is done. The key's order is kept in its lease blob's
// metadata (internal/keyorder), read and written by the holder of the
// key's one place.

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/azdispatch/azdispatch/internal/keyorder"
)

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
		l.saveOrder(ctx, t, state, meta)
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
	l.leaveKey(t, false)
	if t.ended() {
		return l.interrupted(t)
	}
	snooze := l.opts.Limits.Snooze
	return action{kind: actSnooze, after: snooze + rand.N(snooze/2+1)}
}

// orderDone records, as t gives up its key's place, that its message is
// done in the key's order, if it was handled or poisoned: the message
// that follows it may run. One Set Blob Metadata, under the key's lease.
func (l *Listener[T]) orderDone(t *try) {
	if t.order.N == 0 || t.keyLock == nil {
		return
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
		return
	}
	state := keyorder.Load(meta)
	state.Done(stamp, l.receivedAt(t.d))
	l.saveOrder(ctx, t, state, meta)
}

// saveOrder writes a key's order to its lease blob. If that fails, the
// messages after this one wait for it until OrderWait gives it up.
func (l *Listener[T]) saveOrder(ctx context.Context, t *try, state keyorder.State, meta map[string]string) {
	err := t.keyLock.SetMeta(ctx, state.Meta(meta))
	switch {
	case err == nil:
		return
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
	default:
		l.storageFailed(storageError(opBlobWrite, l.src.Name(), err))
	}
	l.msgLog(t.d).Warn("a key's order could not be written: the messages after this one wait for it until OrderWait", "key", t.key, "err", err)
}
