package azdispatch

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/azdispatch/azdispatch/internal/payload"
)

// try is one delivery of a message on its way through the listener.
type try struct {
	s *session
	d *Delivery
	// ctx is this try's: it ends when ownership is lost (cause
	// ErrOwnershipLost), when a handler runs past HandlerTimeout (cause
	// ErrHandlerTimeout), or with the session's work at the drain timeout.
	// Renewals stop when it ends, so that the message reappears for another
	// try even if a handler never returns.
	ctx   context.Context
	end   context.CancelCauseFunc
	renew *renewer
	// blob is the payload blob of an offloaded message, deleted after the
	// message is.
	blob *payload.Pointer
	// saveProgress, set by a batch, records its completed items before the
	// message is seen again (released, lost, or left by a failed delete).
	saveProgress func(context.Context)
	// origin is d's receipt as received, read before renewals start: a
	// renewal may replace d.Receipt while batch items are being poisoned,
	// and the poison move routes by it (see besideSender).
	origin any
}

// process takes one received message to its end: handled and deleted,
// released for a retry, poisoned, released at once at shutdown, or lost to
// another receiver.
func (l *Listener[T]) process(s *session, d *Delivery) {
	l.stats.inFlight.Add(1)
	defer l.stats.inFlight.Add(-1)
	ctx, end := context.WithCancelCause(s.work)
	t := &try{s: s, d: d, ctx: ctx, end: end, origin: d.Receipt}
	t.renew = l.startRenewer(t)
	l.settle(t, l.work(t))
}

// work does what the message asks and says what should become of it: a
// pointer is resolved first, a batch runs its items, anything else is
// decoded and handed to the handler.
func (l *Listener[T]) work(t *try) action {
	d := t.d
	if d.DequeueCount > l.opts.MaxDequeueCount {
		// Its earlier tries never reported back (a crash, a lost delete):
		// poison it without trying again.
		return poison(fmt.Sprintf("dequeued %d times, more than MaxDequeueCount %d", d.DequeueCount, l.opts.MaxDequeueCount))
	}
	text := d.Text
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
		f, err := l.opts.Payloads.fetch(t.ctx, p)
		if err == nil {
			text, err = payload.SingleText(f.data, l.limits)
		}
		if err != nil {
			return l.payloadFailed(t, err)
		}
		t.blob = p
	}
	var body T
	if err := l.decode(text, &body); err != nil {
		return poison((&DecodeError{Err: err}).Error())
	}
	m := &Message[T]{Body: body, ID: d.ID, DequeueCount: d.DequeueCount, InsertedAt: d.InsertedAt, Queue: d.Queue}
	// A message waits here, hidden and renewed, while batch items hold
	// every handler token; its HandlerTimeout starts once it has one.
	if err := l.takeHandler(t); err != nil {
		return l.judge(t, t.ctx, err)
	}
	defer l.giveHandler()
	return l.runHandler(t, m)
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

// takeHandler waits for one of the listener's handler tokens, which single
// messages and the items of batches share. It fails with errNotStarted when
// Run's context ends first, or with the try's cause; a token it got then is
// given back.
func (l *Listener[T]) takeHandler(t *try) error {
	select {
	case l.handlers <- struct{}{}:
	case <-t.ctx.Done():
		return context.Cause(t.ctx)
	case <-t.s.run.Done():
		return errNotStarted
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

// giveHandler gives back a token takeHandler took.
func (l *Listener[T]) giveHandler() { <-l.handlers }

// runHandler calls the handler for m, a message or a batch item, under
// HandlerTimeout, and judges its result.
func (l *Listener[T]) runHandler(t *try, m *Message[T]) action {
	if l.opts.HandlerTimeout <= 0 {
		return l.judge(t, t.ctx, l.call(t.ctx, m))
	}
	ctx, cancel := context.WithTimeoutCause(t.ctx, l.opts.HandlerTimeout, ErrHandlerTimeout)
	defer cancel()
	// A handler past its own deadline (not one cut short with the whole
	// try) ends the try: renewals stop, so that the message reappears for
	// another try even if the handler never returns.
	defer context.AfterFunc(ctx, func() {
		if ctx.Err() == context.DeadlineExceeded {
			t.end(ErrHandlerTimeout)
		}
	})()
	return l.judge(t, ctx, l.call(ctx, m))
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
