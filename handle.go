package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// process takes one received message to its end: poisoned, handled and
// deleted, released for a retry, or lost to another receiver. A pointer to
// an offloaded payload is resolved first: a batch runs its items, a single
// payload is handled as if its text had been on the queue. run is Run's
// context: a message whose handler has not started when it ends is made
// visible again at once.
func (l *Listener[T]) process(run, work context.Context, d *Delivery) {
	l.stats.inFlight.Add(1)
	defer l.stats.inFlight.Add(-1)

	if d.DequeueCount > l.cfg.MaxDequeueCount {
		// Its earlier tries never reported back (a crash, a lost delete):
		// poison it without trying again.
		l.poison(work, d, fmt.Sprintf("dequeued %d times, more than MaxDequeueCount %d", d.DequeueCount, l.cfg.MaxDequeueCount))
		return
	}
	text := d.Text
	var p *pointer // the payload blob, for a message sent by claim check
	if isPointer(text) {
		var ok bool
		if p, text, ok = l.resolve(run, work, d); !ok {
			return // a batch, run to its end, or a pointer that could not be resolved
		}
	}
	var body T
	if err := l.decode(text, &body); err != nil {
		l.poison(work, d, (&DecodeError{Err: err}).Error())
		return
	}
	m := &Message[T]{Body: body, ID: d.ID, DequeueCount: d.DequeueCount, InsertedAt: d.InsertedAt, Queue: d.QueueName()}
	lost, err := l.handle(run, work, d, m)
	l.settle(work, d, err, lost, p)
}

// decode runs the codec, which may run user code (a type's UnmarshalJSON)
// on untrusted input: a panic there poisons the message, not the process.
func (l *Listener[T]) decode(text string, body *T) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("codec panicked: %v", v)
		}
	}()
	return l.cfg.Codec.Decode(text, body)
}

// handle runs the handler with the message kept hidden meanwhile, once a
// handler token is free. It reports whether ownership was lost while it
// ran, and the handler's result: errNotStarted if Run's context (run) ended
// before the handler could start.
func (l *Listener[T]) handle(run, work context.Context, d *Delivery, m *Message[T]) (lost bool, err error) {
	return l.hidden(run, work, d, func(ctx context.Context) error { return l.call(ctx, m) })
}

// errNotStarted reports a message whose handler never started because the
// listener began to shut down while it waited for a handler token.
var errNotStarted = errors.New("azdispatch: not started before shutdown")

// hidden runs f with d kept hidden meanwhile, under HandlerTimeout. It
// reports whether ownership was lost while f ran, and f's result. With a
// non-nil run, f is a handler call: it first waits for one of the
// listener's handler tokens (batch items may hold them all), and its
// HandlerTimeout starts once it has one.
func (l *Listener[T]) hidden(run, work context.Context, d *Delivery, f func(context.Context) error) (lost bool, err error) {
	ctx, cancel := context.WithCancelCause(work)
	defer cancel(nil)
	r := l.startRenewer(work, ctx, d, cancel)
	err = l.runHidden(run, ctx, cancel, f)
	return r.stop(), err
}

// takeHandler waits for one of the listener's handler tokens, which single
// messages and the items of batches share. It fails with errNotStarted when
// run (Run's context) ends first, or with ctx's cause; a token it got then
// is given back.
func (l *Listener[T]) takeHandler(run, ctx context.Context) error {
	select {
	case l.handlers <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-run.Done():
		return errNotStarted
	}
	switch {
	case run.Err() != nil:
		l.giveHandler()
		return errNotStarted
	case ctx.Err() != nil:
		l.giveHandler()
		return context.Cause(ctx)
	}
	return nil
}

// giveHandler gives back a token takeHandler took.
func (l *Listener[T]) giveHandler() { <-l.handlers }

// runHidden is hidden's body, run while the renewer keeps d hidden.
func (l *Listener[T]) runHidden(run, ctx context.Context, cancel context.CancelCauseFunc, f func(context.Context) error) error {
	if run != nil {
		if err := l.takeHandler(run, ctx); err != nil {
			return err
		}
		defer l.giveHandler()
	}
	if l.cfg.HandlerTimeout <= 0 {
		return f(ctx)
	}
	fctx, stop := context.WithTimeoutCause(ctx, l.cfg.HandlerTimeout, ErrHandlerTimeout)
	defer stop()
	// On a timeout, ctx ends too: renewals stop, so that the message
	// reappears for another try even if f never returns.
	defer context.AfterFunc(fctx, func() {
		if errors.Is(context.Cause(fctx), ErrHandlerTimeout) {
			cancel(ErrHandlerTimeout)
		}
	})()
	return f(fctx)
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

// settle applies the handler's result to the message; p is its payload
// blob, if it was sent by claim check, deleted after the message.
func (l *Listener[T]) settle(work context.Context, d *Delivery, err error, lost bool, p *pointer) {
	ctx, cancel := settleContext(work)
	defer cancel()

	switch {
	case lost:
		l.stats.lost.Add(1)
		l.msgLog(d).Warn("ownership lost while handling; the message will be delivered again", "err", err)
	case errors.Is(err, errNotStarted):
		// Received, never started: let another listener have it now.
		l.count(l.release(ctx, d, 0), &l.stats.released)
	case err == nil:
		if derr := l.src.Delete(ctx, d); derr != nil {
			l.stats.lost.Add(1)
			l.msgLog(d).Warn("handled, but the delete failed; the message will be delivered again", "err", derr)
			return
		}
		l.stats.succeeded.Add(1)
		if p != nil {
			l.removePayload(ctx, d, p)
		}
	case errors.Is(context.Cause(work), ErrDrainTimeout):
		// Cut off by shutdown, not failed: let another listener have it now.
		l.count(l.release(ctx, d, 0), &l.stats.released)
	case errors.As(err, new(*PermanentError)):
		l.stats.failed.Add(1)
		l.poison(work, d, err.Error())
	default:
		l.failure(d, err)
		if d.DequeueCount >= l.cfg.MaxDequeueCount {
			// Its last try: poison now rather than at the next delivery,
			// which would cost a release, a receive and the retry delay.
			l.poison(work, d, lastTry(d, err))
			return
		}
		l.msgLog(d).Info("handler failed; retrying later", "err", err)
		l.count(l.release(ctx, d, l.cfg.Retry(d.DequeueCount)), &l.stats.retried)
	}
}

// failure counts a failed handler call, logging a panic with its stack.
func (l *Listener[T]) failure(d *Delivery, err error, attrs ...any) {
	l.stats.failed.Add(1)
	var pe *PanicError
	if errors.As(err, &pe) {
		l.stats.panics.Add(1)
		l.msgLog(d).Error("handler panicked", append(attrs, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))...)
	}
}

// lastTry is the poison reason of a failure on a message's last try.
func lastTry(d *Delivery, err error) string {
	return fmt.Sprintf("failed %d times; last error: %v", d.DequeueCount, err)
}

// release hides d for after (0: visible at once), remembering when it is
// due. It reports success; on failure the message reappears when its
// visibility timeout ends.
func (l *Listener[T]) release(ctx context.Context, d *Delivery, after time.Duration) bool {
	after = min(max(after, 0), MaxVisibility) // a custom RetryFunc may stray
	if err := l.src.SetVisibility(ctx, d, after); err != nil {
		l.msgLog(d).Warn("release failed; the message reappears after its visibility timeout", "err", err)
		return false
	}
	if after > 0 {
		// The service counts whole seconds, rounded up.
		l.due.add(time.Now().Add(time.Duration(seconds(after)) * time.Second))
	}
	return true
}

// poison copies d into the poison queue with reason, then deletes it. If the
// copy fails the message stays where it is (released for a retry delay), so
// that it is never in neither queue. A pointer's blob is first marked as
// poisoned, so that Sweep keeps it for the envelope.
func (l *Listener[T]) poison(work context.Context, d *Delivery, reason string) {
	ctx, cancel := settleContext(work)
	defer cancel()
	log := l.msgLog(d).With("reason", reason)
	err := l.keepPayload(ctx, d)
	var text string
	if err == nil {
		text, err = envelopeText(ctx, newPoisonEnvelope(l.src.Name(), d, reason, time.Now()), l.cfg.Payloads, l.cfg.PayloadLimits)
	}
	if err == nil {
		_, err = l.cfg.PoisonQueue.Send(ctx, text, &SendOptions{TTL: -1})
	}
	if err != nil {
		l.stats.poisonErrors.Add(1)
		log.Error("cannot move the message to the poison queue; it stays in its queue", "err", err)
		l.count(l.release(ctx, d, l.cfg.Retry(d.DequeueCount)), &l.stats.retried)
		return
	}
	l.stats.poisoned.Add(1)
	log.Warn("message poisoned")
	if err := l.src.Delete(ctx, d); err != nil {
		log.Warn("copied to the poison queue but not deleted; it may be poisoned twice", "err", err)
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

// settleContext is for requests that must finish even when the listener is
// stopping: it keeps work's values (the transaction counter) but not its
// cancellation, and has its own timeout.
func settleContext(work context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(work), settleTimeout)
}
