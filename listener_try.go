package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/gather"
	"github.com/azdispatch/azdispatch/internal/keylock"
	"github.com/azdispatch/azdispatch/internal/keyorder"
	"github.com/azdispatch/azdispatch/internal/memo"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// try is one delivery of a message on its way through the listener.
type try struct {
	s *session
	d *Delivery
	// received is when the receive that brought d was asked for, by the
	// local clock: its visibility timeout runs from about then.
	received time.Time
	// reappearEarliest is the earliest d may reappear unless it is settled, by
	// the local clock, in Unix nanoseconds: its visibility timeout from the
	// start of the receive, or of the last renewal. Renewals are timed by it.
	reappearEarliest atomic.Int64
	// reappearLatest is the latest d reappears unless it is settled: its
	// visibility timeout, in the service's whole seconds, from the end of
	// that request, and a margin (see reappearsBy). Due times are set by it, so
	// that a dequeuer started for d finds it.
	reappearLatest atomic.Int64
	// tc is this try's context (see tryContext): read it with context,
	// ended and cause, end it with end.
	tc tryContext
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
	// meta is the metadata the message carried, nil if none; key is its
	// key (see SendOptions.Key), "" if none; keyIn says whether the try
	// holds a place of the key (see awaitKey), and keyLock is the place's
	// lease across processes, if it has one.
	meta    Metadata
	key     string
	keyIn   bool
	keyLock *keylock.Lock
	// order is the message's place in its key's order once it may run
	// (Limits.InOrder); zero otherwise.
	order keyorder.Stamp
	// due is the message's due line, if it has one.
	due    *wire.DueLine
	waited time.Duration          // its time in queue (see Message.TimeInQueue)
	took   time.Duration          // its handler call's, if it made one
	result atomic.Pointer[[]byte] // a group's child's, left by SetGroupResult
	// seat counts the message on its way to a batch handler's call with
	// the rest of its receive (see gather.Seat); unused otherwise.
	seat gather.Seat
}

// inHand is everything one message needs on its way, in one allocation: its
// try, its call's context, its [Message], and what the stages learn.
type inHand[T any] struct {
	t    try
	call handlerCall
	m    Message[T]
	// msg is the message's text in its parts, and parseErr what made a
	// part unreadable (the parts before it are read): each stage that
	// needs a part judges the error of that part.
	msg      wire.Text
	parseErr error
	// text is the body's text: the message's own, or its blob's for a
	// pointer.
	text string
	// turn is when the message may start under a rate limit, booked at its
	// receive; zero without one.
	turn time.Time
}

// tryDelivery takes one received message to its end: it runs the try's
// stages, then settles the message as the stage that ended the try says
// (handled and deleted, hidden for a retry, poisoned, made visible at once
// at shutdown, or lost to another receiver). It returns how long the
// handler call took, if it made one.
func (l *Listener[T]) tryDelivery(s *session, r arrival) (took time.Duration) {
	// The slot is given back last: a message in hand is counted in
	// InFlight until then, and capacity never shows more.
	defer r.slots.Give(1)
	defer l.letGo(r.d)
	l.stats.inFlight.Add(1)
	defer l.stats.inFlight.Add(-1)
	h := &inHand[T]{turn: r.turn}
	t := &h.t
	d := r.d
	t.s, t.d, t.origin, t.received = s, d, d.Receipt, r.received
	t.hiddenBetween(r.received, r.received.Add(r.took), l.opts.VisibilityTimeout)
	t.begin(s.detached)
	t.seat.Sit(r.group)
	s.watch.addTry(t)
	settled := false
	defer func() {
		if !settled {
			// The handler called runtime.Goexit, which ends this
			// goroutine whatever it does: settle the message on its way
			// out, as a failed call.
			t.seat.Leave()
			a := l.judge(t, t.context(), errHandlerExited)
			l.leaveKey(t, a.kind)
			l.settle(t, a)
			l.givePayload(t)
		}
	}()
	a := l.runStages(h)
	settled = true
	t.seat.Leave() // ended on its way: not waited for by its receive's batch
	a = l.orderUnrecorded(t, a, l.leaveKey(t, a.kind))
	l.settle(t, a)
	l.givePayload(t)
	return t.took
}

// runStages runs the stages of a try, in order, until one ends it; the
// last always does. Each stage returns true, with the action, when the try
// ends there, and false to let the next go on. They are called one by one
// rather than from a list of method values: through a list, each call of
// a generic method goes through a wrapper, which cost about a fifth of the
// listener's own time per message (BenchmarkOverhead).
func (l *Listener[T]) runStages(h *inHand[T]) action {
	if a, end := l.skipSettled(h); end { // handled or poisoned on an earlier delivery: only deleted
		return a
	}
	if a, end := l.readDueLine(h); end { // a message sent for later, or by a Scheduler
		return a
	}
	if a, end := l.holdUntilDue(h); end { // early: a hop, or held until it is due
		return a
	}
	if a, end := l.markOnce(h); end { // a schedule's occurrence: delivered once
		return a
	}
	if a, end := l.checkCancelled(h); end { // a delayed message: cancelled meanwhile?
		return a
	}
	if a, end := l.countTry(h); end { // its time in queue; too many tries
		return a
	}
	if a, end := l.readMetadata(h); end { // what the publisher carried with it
		return a
	}
	if a, end := l.awaitKey(h); end { // a place under its key's limit
		return a
	}
	if a, end := l.awaitOrder(h); end { // the message its key's order puts before it done
		return a
	}
	if a, end := l.fetchPayload(h); end { // a pointer: a batch's items, or a blob's text
		return a
	}
	if a, end := l.decodeBody(h); end { // the codec, into the Message
		return a
	}
	if a, end := l.awaitTurn(h); end { // its turn under a rate limit
		return a
	}
	if a, end := l.markDelivered(h); end { // a tracked message: its status says so
		return a
	}
	a, _ := l.callHandler(h) // through the middleware, judged: always the end
	return a
}

// errHandlerExited is the failure of a handler that called runtime.Goexit
// instead of returning (as testing's FailNow does).
var errHandlerExited = errors.New("azdispatch: the handler ended its goroutine (runtime.Goexit) without returning")

// skipSettled ends the try of a message that was settled on an earlier
// delivery whose delete failed: it is only deleted now.
func (l *Listener[T]) skipSettled(h *inHand[T]) (action, bool) {
	t := &h.t
	d := t.d
	h.msg, h.parseErr = wire.Parse(d.Text, l.limits.PointerLimits())
	t.due = h.msg.Due
	if !errors.Is(h.parseErr, wire.ErrBadMetadata) {
		// Before any stage may end the try: a group's child is finished
		// however it ends (see finishGroup); readMetadata refines it.
		t.meta = h.msg.Meta.Pairs()
	}
	switch as, note := l.memo.Settled(d.ID, d.Text); as {
	case memo.Handled:
		// Handled before: delete it now (and its payload blob, if any,
		// after it), and do not count this delivery against it. A group's
		// child is finished with the result its handler left then.
		t.blob = l.ownPayload(h.msg.Pointer)
		if note != "" {
			result := []byte(note)
			t.result.Store(&result)
		}
		return action{kind: actDone, handledBefore: true}, true
	case memo.Poisoned:
		// Copied to the poison queue before: finish the move, with the
		// reason it was poisoned for. Its payload blob stays, for the
		// envelope.
		return action{kind: actDone, poisonedBefore: true, reason: note}, true
	}
	return action{}, false
}

// readDueLine poisons a message whose due line cannot be read.
func (l *Listener[T]) readDueLine(h *inHand[T]) (action, bool) {
	if errors.Is(h.parseErr, wire.ErrBadDueLine) {
		return poison(h.parseErr.Error()), true
	}
	return action{}, false
}

// holdUntilDue ends the try of a message received before it is due (see
// whenDue), or holds it until then.
func (l *Listener[T]) holdUntilDue(h *inHand[T]) (action, bool) {
	if h.msg.Due == nil {
		return action{}, false
	}
	return l.whenDue(&h.t, h.msg.Due)
}

// markOnce ends the try of a duplicate (see deliverOnce).
func (l *Listener[T]) markOnce(h *inHand[T]) (action, bool) {
	if h.msg.Due != nil && h.msg.Due.Occ != nil {
		return l.deliverOnce(&h.t, h.msg.Due.Occ.Once, h.msg.Pointer, occurrenceName(h.msg.Due.Occ))
	}
	if once := h.msg.Meta.Pairs()[wire.OnceEntry]; once != "" && !errors.Is(h.parseErr, wire.ErrBadMetadata) {
		if !wire.ValidOnce(once) {
			return poison(fmt.Sprintf("malformed once-mark name %.40q in metadata entry %s", once, wire.OnceEntry)), true
		}
		return l.deliverOnce(&h.t, once, h.msg.Pointer, "a group's continuation")
	}
	return action{}, false
}

// checkCancelled ends the try of a delayed message that was cancelled while
// it waited (see deliverOrCancel).
func (l *Listener[T]) checkCancelled(h *inHand[T]) (action, bool) {
	if h.msg.Due == nil || h.msg.Due.Occ != nil || h.msg.Due.Kept(l.hop) {
		return action{}, false
	}
	return l.deliverOrCancel(&h.t, h.msg.Pointer)
}

// countTry measures the message's time in queue, now that it is a delivery
// (not a hop, a cancelled message or a duplicate of an occurrence), and
// ends the try of one dequeued too often.
func (l *Listener[T]) countTry(h *inHand[T]) (action, bool) {
	t := &h.t
	l.measureWait(t, h.msg.Due)
	if d := t.d; d.DequeueCount > l.opts.MaxDequeueCount {
		// Its earlier tries never reported back (a crash, a lost delete):
		// poison it without trying again.
		return poison(fmt.Sprintf("dequeued %d times, more than MaxDequeueCount %d", d.DequeueCount, l.opts.MaxDequeueCount)), true
	}
	return action{}, false
}

// readMetadata reads the metadata line the publisher wrote, if any.
func (l *Listener[T]) readMetadata(h *inHand[T]) (action, bool) {
	if errors.Is(h.parseErr, wire.ErrBadMetadata) {
		return poison(h.parseErr.Error()), true
	}
	h.t.meta = senderMetadata(h.msg.Meta.Pairs()) // the IDs Requeue added are the envelope's, not the handler's
	h.t.key = h.t.meta[MetadataKey]
	return action{}, false
}

// fetchPayload resolves a pointer: a batch's try runs its items and ends
// here; a single message's text is read from its blob.
func (l *Listener[T]) fetchPayload(h *inHand[T]) (action, bool) {
	p, err := h.msg.Pointer, h.parseErr
	if p == nil && err == nil {
		h.text = h.msg.Body
		return action{}, false
	}
	t := &h.t
	switch {
	case err != nil:
		return poison(err.Error()), true
	case l.opts.Payloads.Store == nil:
		return poison(fmt.Sprintf("payload %s cannot be read: %v: %s has no payload store (see PayloadStorer); set ListenerOptions.Payloads.Store",
			p.Blob, ErrNoBlobService, l.src.Name())), true
	case p.Container != "" && p.Container != l.opts.Payloads.Store.Container():
		// Read from the listener's own container only, whatever a pointer
		// says: this one was written for another.
		return poison(fmt.Sprintf("%v: payload %s was written to container %q; this listener reads payloads from %q (ListenerOptions.Payloads.Store)",
			ErrInvalidPointer, p.Blob, p.Container, l.opts.Payloads.Store.Container())), true
	case p.Kind == wire.KindBatch:
		return l.tryBatch(t, p, h.turn), true
	}
	// Room for the blob and the text it inflates to; once the text is out,
	// it alone is kept, until the message is settled.
	if err := l.takePayload(t, p.Size+int64(l.limits.MaxItemSize)); err != nil {
		return l.judge(t, t.context(), err), true
	}
	f, err := l.fetch(t, p)
	var text string
	if err == nil {
		text, err = payload.SingleText(f.data, l.limits)
	}
	if err != nil {
		return l.payloadFailed(t, err), true
	}
	l.shrinkPayload(t, int64(len(text)))
	h.text, t.blob = text, p
	return action{}, false
}

// decodeBody decodes the message's text into the Message the handler gets.
func (l *Listener[T]) decodeBody(h *inHand[T]) (action, bool) {
	t, m := &h.t, &h.m
	if err := l.decode(h.text, &m.Body); err != nil {
		return poison(decodeFailed(err)), true
	}
	d := t.d
	m.ID, m.DequeueCount, m.InsertedAt, m.Queue, m.TimeInQueue, m.Key = d.ID, d.DequeueCount, d.InsertedAt, d.Queue, t.waited, t.key
	if h.msg.Due != nil && h.msg.Due.Occ != nil {
		m.Occurrence = occurrenceOf(h.msg.Due.Occ)
	}
	return action{}, false
}

// callHandler calls the handler for the message, once a handler token is
// free, and judges its result.
func (l *Listener[T]) callHandler(h *inHand[T]) (action, bool) {
	t := &h.t
	place, err := l.takeHandler(t, l.opts.Concurrency)
	switch {
	case errors.Is(err, keylock.ErrCrowded):
		return action{kind: actSnooze, after: l.keySnooze()}, true
	case err != nil:
		return l.judge(t, t.context(), err), true
	}
	defer l.giveHandler(place)
	return l.judge(t, &h.call, l.callWatched(t, &h.call, &h.m, len(h.text))), true
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
	return l.decoder.Decode(text, body)
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
			if t.ended() {
				return t.cause()
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

// untilRunEnds returns a context that ends with the try's or with Run's,
// for a wait that either ends; done releases it.
func (t *try) untilRunEnds() (ctx context.Context, done func()) {
	t.seat.Leave() // a batch does not wait for a message that waits
	ctx, cancel := context.WithCancel(t.context())
	stop := context.AfterFunc(t.s.run, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// callWatched calls the handler for m, a message or a batch item decoded
// from size bytes of text, through the middleware if any, with c as its
// context, watched for HandlerTimeout.
func (l *Listener[T]) callWatched(t *try, c *handlerCall, m *Message[T], size int) error {
	start := time.Now()
	if l.batch == nil {
		t.s.watch.startCall(t, c, start)
		defer t.s.watch.endCall(t, c) // deferred: a handler may end its goroutine
	} else {
		c.try, c.timer.call = t, c // watched once its batch call starts (see callBatch)
	}
	err := l.callChain(c, t, m, size)
	took := time.Since(start) // the monotonic clock alone: half the cost of time.Now
	end := start.Add(took)
	l.stats.handlerTime.Add(end, took)
	if c.item == nil {
		t.took = took // a batch's items, called at once, leave it alone
	}
	if err != nil && c.timedOut.Load() {
		err = fmt.Errorf("%w after %v: %w", ErrHandlerTimeout, l.opts.HandlerTimeout, err)
	}
	return err
}

// callRecovering calls the handler, turning a panic into a [*PanicError].
func (l *Listener[T]) callRecovering(ctx context.Context, c *handlerCall, m *Message[T]) (err error) {
	if l.batch != nil {
		return l.awaitBatch(ctx, c, m)
	}
	defer catchPanic(&err)
	return l.handler(ctx, m)
}

// tryContext is a try's context: it ends when ownership is lost (cause
// [ErrOwnershipLost]), when a handler runs past HandlerTimeout (cause
// [ErrHandlerTimeout]), at the drain timeout (cause [ErrDrainTimeout]), or
// once the message is settled. Renewals stop when it ends, so that the
// message reappears for another try even if a handler never returns.
//
// The context itself is made only when something asks for it (a handler
// that reads its context's Done or values, a storage request, a wait):
// most tries end without one, and a context made for every message was two
// of the listener's allocations per message. Whether the try has ended,
// and why, is known without it.
type tryContext struct {
	ended atomic.Bool

	mu     sync.Mutex
	parent context.Context
	ctx    context.Context // nil until asked for
	cancel context.CancelCauseFunc
	cause  error  // set once ended
	onEnd  func() // called once it ends (see whenEnded)
}

// begin sets the parent of t's context: the session's, for its values.
func (t *try) begin(parent context.Context) { t.tc.parent = parent }

// context returns t's context, making it on first use; it has ended
// already if t has.
func (t *try) context() context.Context {
	c := &t.tc
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithCancelCause(c.parent)
		if c.ended.Load() {
			c.cancel(c.cause)
		}
	}
	return c.ctx
}

// end ends t's context with cause ([context.Canceled] if nil); the first
// cause wins, as with a [context.CancelCauseFunc].
func (t *try) end(cause error) {
	c := &t.tc
	c.mu.Lock()
	if c.ended.Load() {
		c.mu.Unlock()
		return
	}
	if cause == nil {
		cause = context.Canceled
	}
	c.cause = cause
	c.ended.Store(true)
	if c.cancel != nil {
		c.cancel(cause)
	}
	onEnd := c.onEnd
	c.onEnd = nil
	c.mu.Unlock()
	if onEnd != nil {
		onEnd()
	}
}

// whenEnded has f called once t ends, unless stopWhenEnded comes first,
// without making t's context: for a wait that does not select on it. It
// reports false, and keeps nothing, if t has ended already.
func (t *try) whenEnded(f func()) bool {
	c := &t.tc
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended.Load() {
		return false
	}
	c.onEnd = f
	return true
}

// stopWhenEnded drops what whenEnded kept.
func (t *try) stopWhenEnded() {
	c := &t.tc
	c.mu.Lock()
	c.onEnd = nil
	c.mu.Unlock()
}

// ended reports whether t's context has ended, without making it.
func (t *try) ended() bool { return t.tc.ended.Load() }

// cause is why t's context ended (as [context.Cause] says it), nil while it
// has not.
func (t *try) cause() error {
	c := &t.tc
	if !c.ended.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}
