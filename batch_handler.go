package azdispatch

// A handler for many messages at once. Each message takes its own way
// through the listener as with a handler for one (its tries, its key's
// place, its payload, the middleware), and where that way ends in the
// handler it joins a batch instead (internal/gather), which one goroutine
// calls; each message then goes on with its own outcome, and is settled
// alone. So everything a listener promises a message holds per message.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/azdispatch/azdispatch/internal/gather"
)

// BatchHandler handles many messages in one call: those of one receive (up
// to 32), or those gathered within [BatchOptions.MaxWait]. It returns nil
// when every message is handled; a [*BatchError] (see [PerMessage]) with an
// outcome for each message, so that one bad message is retried, poisoned
// or snoozed alone (found with [errors.As], so it may be wrapped; one
// without exactly one outcome per message fails every message); or another
// error, the outcome of every message. A panic fails every message. Each outcome means what a [Handler]'s error
// means: nil deletes the message, [Permanent] poisons it, [Snooze] puts it
// back without counting a try, and any other error retries it after
// [ListenerOptions.Retry]'s delay.
//
// The messages are the listener's until the call returns.
type BatchHandler[T any] func(ctx context.Context, msgs []*Message[T]) error

// BatchOptions says how a batch listener (see [NewBatchListener]) forms its
// calls. The zero value calls the handler once per receive.
type BatchOptions struct {
	// MaxItems is the most messages in one call, 1 to 1000. Defaults to
	// 32, a full receive. Above 32 it needs a MaxWait to gather them.
	MaxItems int

	// MaxWait is how long a call waits for more messages after its first,
	// across receives, until it has MaxItems; at most 10 minutes. The
	// messages waiting stay hidden, renewed at half their visibility
	// timeout like any message in hand. Zero, the default, calls the
	// handler with the messages of one receive once each of them has
	// reached it, or has stopped on its way (for its key's place, a rate
	// limit's turn, memory, or for good), and at most a second after the
	// first reached it (a request on another's way may hang): no message
	// waits long for one that waits for something else.
	MaxWait time.Duration

	// ByKey gives every call the messages of one key only (see
	// [SendOptions.Key]); messages without a key share a call. With
	// [ShardedQueue.Subset] over keyed shards, a key's messages reach one
	// listener, and gather there.
	ByKey bool
}

// maxBatchItems bounds BatchOptions.MaxItems: a call's messages are all
// in hand, hidden and renewed, until it returns.
const maxBatchItems = 1000

// maxBatchWait bounds BatchOptions.MaxWait.
const maxBatchWait = 10 * time.Minute

// batchGroupWait is the longest a call with no MaxWait waits for the rest
// of its receive after the first of them reached it.
const batchGroupWait = time.Second

// defaultBatchCalls is ListenerOptions.Concurrency's default for a batch
// listener: a call runs while the next gathers.
const defaultBatchCalls = 2

// withDefaults returns o with defaults filled in and checked.
func (o BatchOptions) withDefaults() (BatchOptions, error) {
	setDefault(&o.MaxItems, MaxBatch)
	switch {
	case o.MaxItems < 1 || o.MaxItems > maxBatchItems:
		return o, badListenerOption("Batch.MaxItems", "%d is not between 1 and %d", o.MaxItems, maxBatchItems)
	case o.MaxWait < 0 || o.MaxWait > maxBatchWait:
		return o, badListenerOption("Batch.MaxWait", "%v is not between 0 and %v", o.MaxWait, maxBatchWait)
	}
	return o, nil
}

// NewBatchListener returns a listener that calls handler with many messages
// at once, formed as opts.Batch says. Everything else is as with
// [NewListener]: each message is received, renewed, retried, poisoned,
// deleted and counted in [State] on its own, and middleware sees each
// message's call (which lasts from when it joins its batch until the batch
// call returns). [ListenerOptions.Concurrency] is the most calls of one
// dequeuer at once, 2 by default, so a dequeuer has up to Concurrency ×
// MaxItems messages in hand; [ListenerOptions.HandlerTimeout] bounds each
// call, and ends the messages in it as it ends a message's call.
func NewBatchListener[T any](source Source, handler BatchHandler[T], opts *ListenerOptions) (*Listener[T], error) {
	if handler == nil {
		return nil, &ConfigError{Field: "handler", Reason: "nil"}
	}
	var o ListenerOptions
	if opts != nil {
		o = *opts
	}
	batch, err := o.Batch.withDefaults()
	if err != nil {
		return nil, err
	}
	calls := o.Concurrency
	setDefault(&calls, defaultBatchCalls)
	if calls < 1 {
		return nil, badListenerOption("Concurrency", "%d is less than 1", calls)
	}
	// The engine counts messages in handler calls: a call's worth each.
	o.Concurrency = calls * batch.MaxItems
	o.Batch = BatchOptions{}
	l, err := newListener(source, Handler[T](nil), &o)
	if err != nil {
		return nil, err
	}
	l.opts.Batch = batch
	l.batch = &batcher[T]{
		handler: handler,
		opts:    batch,
		calls:   semaphore.NewWeighted(int64(calls * l.opts.Scaling.MaxDequeuers)),
	}
	for _, m := range l.opts.Middleware {
		if bm, ok := m.(BatchMiddleware); ok {
			l.batch.mw = append(l.batch.mw, bm)
		}
	}
	return l, nil
}

// BatchMiddleware is a [Middleware] that also wraps the calls of a batch
// handler (see [NewBatchListener]): each message's call goes through
// HandleCall as with a handler for one, and the batch call through
// HandleBatch, inside them all. A middleware in [ListenerOptions.Middleware]
// that has the method is used so, in the same order.
type BatchMiddleware interface {
	Middleware
	HandleBatch(ctx context.Context, b *BatchCall) error
}

// BatchCall is one call of a batch handler on its way through the
// [BatchMiddleware]. The listener's, not to be changed but through Next.
type BatchCall struct {
	// Source is the listener's source's name.
	Source string
	// Messages describe the call's messages, in the order the handler
	// gets them.
	Messages []MessageInfo
	// Contexts are the contexts of the messages' own calls, as the
	// middleware passed them on (a trace's span of each, for one), in the
	// same order: what a batch's span links to.
	Contexts []context.Context

	chain []BatchMiddleware
	pos   int
	call  func(ctx context.Context) error
}

// Next runs the rest of the chain and then the batch handler with ctx,
// and returns their result.
func (b *BatchCall) Next(ctx context.Context) error {
	i := b.pos
	if i == len(b.chain) {
		return b.call(ctx)
	}
	b.pos = i + 1
	defer func() { b.pos = i }()
	return b.chain[i].HandleBatch(ctx, b)
}

// BatchError is a batch handler's outcome for each message: Errs[i] is
// that of the i-th message it was given, nil if it was handled.
type BatchError struct {
	Errs []error
}

// PerMessage returns the outcomes errs of a batch handler's messages, in
// their order, as its error: nil if every one is nil, a [*BatchError]
// otherwise.
func PerMessage(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return &BatchError{Errs: errs}
		}
	}
	return nil
}

// Error says how many messages failed, and the first failure.
func (e *BatchError) Error() string {
	if e == nil {
		return "batch: no outcomes (a nil *BatchError)"
	}
	failed, first := 0, -1
	for i, err := range e.Errs {
		if err != nil {
			failed++
			if first < 0 {
				first = i
			}
		}
	}
	if failed == 0 {
		return fmt.Sprintf("batch of %d: every message handled", len(e.Errs))
	}
	return fmt.Sprintf("batch of %d: %d failed; message %d: %v", len(e.Errs), failed, first, e.Errs[first])
}

// Unwrap returns the failures, for [errors.Is] and [errors.As].
func (e *BatchError) Unwrap() []error {
	if e == nil {
		return nil
	}
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// batcher is what a batch listener adds to a listener: its handler, the
// middleware that wraps its calls, and the calls it may make at once.
type batcher[T any] struct {
	handler BatchHandler[T]
	mw      []BatchMiddleware
	opts    BatchOptions
	calls   *semaphore.Weighted
	// gather forms the calls of one Run; set as Run starts.
	gather *gather.Gatherer[*member[T]]
}

// member is a message in a batch: its handler call, the context the
// middleware gave it, and the message the batch handler gets.
type member[T any] struct {
	call *handlerCall
	ctx  context.Context
	m    *Message[T]
}

// startGathering makes the gatherer of a Run's batches; stopGathering,
// as Run stops receiving, ends the batches still open, their messages
// uncalled and made visible again at once, as messages not started are.
func (l *Listener[T]) startGathering(s *session) {
	o := l.batch.opts
	l.batch.gather = gather.New(gather.Options{MaxItems: o.MaxItems, MaxWait: o.MaxWait, ByKey: o.ByKey, GroupWait: batchGroupWait},
		func(b *gather.Batch[*member[T]]) { s.handlers.Go(func() { l.callBatch(s, b) }) })
}

// stopGathering: see startGathering.
func (l *Listener[T]) stopGathering() { l.batch.gather.Stop(errNotStarted) }

// seatOf is where a handler call's message is counted on its way to a
// batch: a batch item's own seat, or its message's.
func seatOf(c *handlerCall) *gather.Seat {
	if c.item != nil {
		return &c.item.seat
	}
	return &c.try.seat
}

// awaitBatch is a batch listener's end of a message's call: the message
// joins a batch, and returns its outcome once the batch call has returned,
// or the cause of its own context if that ends first.
func (l *Listener[T]) awaitBatch(ctx context.Context, c *handlerCall, m *Message[T]) error {
	b, i := l.batch.gather.Join(m.Key, seatOf(c), &member[T]{call: c, ctx: ctx, m: m})
	if b == nil {
		return errNotStarted
	}
	if ctx == context.Context(c) && c.item == nil {
		return awaitUnwatched(c.try, b, i)
	}
	select {
	case <-b.Done():
		return b.Outcome(i)
	case <-ctx.Done():
		if b.Leave(i) {
			return context.Cause(ctx)
		}
		// In a call that has begun: the message holds what a handler
		// call holds (its key's place, a place of the fleet's) until the
		// call returns, as a message whose handler ignores its context
		// does.
		<-b.Done()
		return b.Outcome(i)
	}
}

// awaitUnwatched is awaitBatch for a message's call whose context nobody
// has asked for (no middleware, no item): rather than make the try's
// context to select on, it has the try's end take the message out of its
// batch, if its call has not begun, and waits for the batch.
func awaitUnwatched[T any](t *try, b *gather.Batch[*member[T]], i int) error {
	if !t.whenEnded(func() { b.Leave(i) }) {
		b.Leave(i)
	}
	<-b.Done()
	t.stopWhenEnded()
	// A member that left has no outcome of the call: its try's end is why.
	if err := b.Outcome(i); err != nil || b.Called(i) {
		return err
	}
	return t.cause()
}

// callBatch calls the batch handler with b's messages once a call is
// free, and gives each its outcome. A call that cannot start before Run's
// context ends starts none: its messages are made visible again at once.
// Each message's call is watched from the batch call's start, so that
// HandlerTimeout ends each as it ends a message's.
func (l *Listener[T]) callBatch(s *session, b *gather.Batch[*member[T]]) {
	if err := l.batch.calls.Acquire(s.run, 1); err != nil {
		b.FinishAll(errNotStarted)
		return
	}
	defer l.batch.calls.Release(1)
	in := b.Begin()
	if len(in) == 0 {
		b.Finish(nil)
		return
	}
	msgs := make([]*Message[T], len(in))
	start := time.Now()
	for i, j := range in {
		msgs[i] = j.m
		s.watch.watchBatchCall(j.call, start)
	}
	defer func() {
		for _, j := range in {
			s.watch.endCall(j.call.try, j.call)
		}
	}()
	finished := false
	defer func() {
		if !finished {
			b.FinishAll(errHandlerExited) // the handler ended this goroutine
		}
	}()
	ctx, cancel := l.batchContext(s)
	defer cancel() // deferred: a handler may end its goroutine
	err := l.callBatchRecovering(ctx, in, msgs)
	cause := context.Cause(ctx)
	end := time.Now()
	l.stats.handlerTime.Add(end, end.Sub(start))
	l.stats.calls.Add(1)
	l.stats.callMessages.Add(int64(len(msgs)))
	if err != nil && errors.Is(cause, ErrHandlerTimeout) {
		err = fmt.Errorf("%w after %v: %w", ErrHandlerTimeout, l.opts.HandlerTimeout, err)
	}
	finished = true
	b.Finish(outcomesOf(err, len(msgs)))
}

// batchContext is a batch call's context: it keeps the session's values,
// ends at the drain timeout as a message's call does, and at
// HandlerTimeout, with cause [ErrHandlerTimeout].
func (l *Listener[T]) batchContext(s *session) (context.Context, context.CancelFunc) {
	if l.opts.HandlerTimeout <= 0 {
		return context.WithCancel(s.work)
	}
	return context.WithTimeoutCause(s.work, l.opts.HandlerTimeout, ErrHandlerTimeout)
}

// callBatchRecovering calls the batch handler for the messages in, through
// the batch middleware if any, turning a panic into a [*PanicError].
func (l *Listener[T]) callBatchRecovering(ctx context.Context, in []*member[T], msgs []*Message[T]) (err error) {
	defer catchPanic(&err)
	if l.batch.mw == nil {
		return l.batch.handler(ctx, msgs)
	}
	bc := &BatchCall{Source: l.src.Name(), Messages: make([]MessageInfo, len(in)), Contexts: make([]context.Context, len(in)),
		chain: l.batch.mw, call: func(ctx context.Context) error { return l.batch.handler(ctx, msgs) }}
	for i, j := range in {
		bc.Messages[i], bc.Contexts[i] = j.m.MessageInfo, j.ctx
	}
	return bc.Next(ctx)
}

// outcomesOf is each of n messages' outcome of a batch call that returned
// err: nil for all, a [*BatchError]'s own (if it has one per message; it
// may be wrapped), or err for all. A *BatchError without one outcome per
// message (a nil one too) fails every message with a plain error that
// says so: none of its outcomes (a Permanent, a Snooze) applies to all.
func outcomesOf(err error, n int) []error {
	if err == nil {
		return nil
	}
	var be *BatchError
	if errors.As(err, &be) {
		if be != nil && len(be.Errs) == n {
			return be.Errs
		}
		got := 0
		if be != nil {
			got = len(be.Errs)
		}
		err = fmt.Errorf("azdispatch: the batch handler returned %d outcomes for %d messages (%v)", got, n, err)
	}
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}
