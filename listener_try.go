package azdispatch

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/payload"
)

// try is one delivery of a message on its way through the listener.
type try struct {
	s *session
	d *Delivery
	// received is when the receive that brought d was asked for, by the
	// local clock: its visibility timeout runs from about then.
	received time.Time
	// hiddenUntil is when d reappears unless it is settled, by the local
	// clock, in Unix nanoseconds: its visibility timeout from the receive,
	// or from the last renewal.
	hiddenUntil atomic.Int64
	// ctx is this try's: it ends when ownership is lost (cause
	// ErrOwnershipLost), when a handler runs past HandlerTimeout (cause
	// ErrHandlerTimeout), or at the drain timeout (cause ErrDrainTimeout).
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
	blob *payload.Pointer
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
}

// inHand is everything one message needs on its way, in one allocation:
// its try, its handler call's context and the Message the handler gets.
type inHand[T any] struct {
	t    try
	call handlerCall
	m    Message[T]
}

// process takes one received message to its end: handled and deleted,
// released for a retry, poisoned, released at once at shutdown, or lost to
// another receiver.
func (l *Listener[T]) process(s *session, d *Delivery, received time.Time) {
	l.stats.inFlight.Add(1)
	defer l.stats.inFlight.Add(-1)
	h := &inHand[T]{}
	t := &h.t
	t.s, t.d, t.origin, t.received = s, d, d.Receipt, received
	t.hiddenUntil.Store(received.Add(l.opts.VisibilityTimeout).UnixNano())
	t.ctx, t.end = context.WithCancelCause(s.detached)
	s.watch.addTry(t)
	l.settle(t, l.work(h))
	l.budget.give(t)
}

// work does what the message asks and says what should become of it: a
// pointer is resolved first, a batch runs its items, anything else is
// decoded and handed to the handler.
func (l *Listener[T]) work(h *inHand[T]) action {
	t := &h.t
	d := t.d
	switch l.memo.settled(d) {
	case settledHandled:
		// Handled before, but its delete failed: delete it now (and its
		// payload blob, if any, after it), and do not count this delivery
		// against it.
		if _, text, err := ParseMetadata(d.Text); err == nil {
			if p, err := payload.ParsePointer(text, l.limits); err == nil {
				t.blob = p
			}
		}
		return action{kind: actDone, handledBefore: true}
	case settledPoisoned:
		// Copied to the poison queue before, but not deleted: finish the
		// move. Its payload blob stays, for the envelope.
		return action{kind: actDone, poisonedBefore: true}
	}
	if d.DequeueCount > l.opts.MaxDequeueCount {
		// Its earlier tries never reported back (a crash, a lost delete):
		// poison it without trying again.
		return poison(fmt.Sprintf("dequeued %d times, more than MaxDequeueCount %d", d.DequeueCount, l.opts.MaxDequeueCount))
	}
	meta, text, err := ParseMetadata(d.Text)
	if err != nil {
		return poison(err.Error())
	}
	t.meta = meta
	if payload.IsPointer(text) {
		p, err := payload.ParsePointer(text, l.limits)
		switch {
		case err != nil:
			return poison(err.Error())
		case l.opts.Payloads == nil:
			return poison(fmt.Sprintf("payload %s cannot be read: %v", p.Blob, ErrNoBlobService))
		case p.Kind == payload.KindBatch:
			return l.runBatch(t, p)
		}
		// Room for the blob and the text it inflates to; once the text is
		// out, it alone is kept, until the message is settled.
		if err := l.budget.take(t, p.Size+int64(l.limits.MaxItemSize)); err != nil {
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
		l.budget.shrink(t, int64(len(text)))
		t.blob = p
	}
	m := &h.m
	if err := l.decode(text, &m.Body); err != nil {
		return poison((&DecodeError{Err: err}).Error())
	}
	m.ID, m.DequeueCount, m.InsertedAt, m.Queue = d.ID, d.DequeueCount, d.InsertedAt, d.Queue
	// A message waits here, hidden and renewed, while batch items hold
	// every handler token; its HandlerTimeout starts once it has one.
	if err := l.takeHandler(t); err != nil {
		return l.judge(t, t.ctx, err)
	}
	defer l.giveHandler()
	return l.runHandler(t, &h.call, m, len(text))
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

// hidden is when t's message reappears unless it is settled.
func (t *try) hidden() time.Time { return time.Unix(0, t.hiddenUntil.Load()) }

// runHandler calls the handler for m, a message or a batch item decoded
// from size bytes of text, through the middleware if any, with c as its
// context, watched for HandlerTimeout, and judges its result.
func (l *Listener[T]) runHandler(t *try, c *handlerCall, m *Message[T], size int) action {
	t.s.watch.startCall(t, c)
	err := l.handle(c, t, m, size)
	t.s.watch.endCall(t, c)
	if err != nil && c.timedOut.Load() {
		err = fmt.Errorf("%w after %v: %w", ErrHandlerTimeout, l.opts.HandlerTimeout, err)
	}
	return l.judge(t, c, err)
}

// call runs the handler, turning a panic into a *PanicError.
func (l *Listener[T]) call(ctx context.Context, m *Message[T]) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return l.handler(ctx, m)
}
