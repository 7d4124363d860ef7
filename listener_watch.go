package azdispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/gather"
)

// watch is a session's one timer for every message in hand. It starts the
// visibility renewals of a message once half its visibility timeout has
// passed, and ends a try whose handler call runs past HandlerTimeout. Almost
// every message is settled long before either, so on their path a message
// costs an insert and an unlink under a mutex here, not a timer, a context
// and a closure of its own.
//
// Each list is kept in due order, so its head is the next to fire. Entries
// come due a fixed interval after their message was received or their call
// started, so nearly every one goes at the end, and finding its place costs
// a step or two at most.
type watch struct {
	renewAfter time.Duration // half the visibility timeout
	callLimit  time.Duration // HandlerTimeout; 0 for none
	// itemGrace is how long a batch item's call that timed out may take
	// to return before its batch goes on without it (see
	// handlerCall.expire).
	itemGrace  time.Duration
	startRenew func(*try) // starts a try's renewals; called under mu
	// timedOut, if set, is told of a try that a timeout ended: its message
	// reappears when its visibility timeout ends. Called under mu.
	timedOut func(*try)
	// remember, if set, is told of a try whose delete is still under way
	// when its first renewal comes due (see settling). Called under mu.
	remember func(*try)

	mu              sync.Mutex
	renewals, calls watchList
	renewing        watchList     // tries whose renewals have started, in no order
	drained         error         // the cause every try has ended with, once drain is called
	kick            chan struct{} // an entry is due before armed
	// armed is the latest the watch's goroutine looks at the lists again
	// (its timer, or its next tick); zero while it is working out when,
	// or has no timer. An entry due after it needs no kick: nearly every
	// one, so that a message that comes and goes between two looks does
	// not wake the watch.
	armed time.Time

	// tick, if set, is called every period from the watch's goroutine.
	tick   func()
	period time.Duration
}

// watchEntry is a try's place in the renewal list, or a handler call's in
// the call list.
type watchEntry struct {
	prev, next *watchEntry
	due        time.Time
	in         *watchList   // nil when in no list
	try        *try         // for a renewal entry
	call       *handlerCall // for a call entry
}

// watchList is a doubly linked list of entries, in due order.
type watchList struct{ head, tail *watchEntry }

func newWatch(renewAfter, callLimit time.Duration, startRenew func(*try)) *watch {
	callLimit = max(callLimit, 0)
	return &watch{
		renewAfter: renewAfter, callLimit: callLimit, itemGrace: min(callLimit, abandonAfter),
		startRenew: startRenew, kick: make(chan struct{}, 1),
	}
}

// every makes the watch call f every period, from its goroutine, until it
// stops. Call it before run.
func (w *watch) every(period time.Duration, f func()) { w.tick, w.period = f, period }

// addTry watches t for its first renewal, due half its visibility timeout
// after it was received. Every try is in the watch from then until
// removeTry, so that drain reaches it.
func (w *watch) addTry(t *try) {
	t.renewAt.try = t
	w.add(&w.renewals, &t.renewAt, t.received.Add(w.renewAfter))
}

// drain ends every try in the watch, and every one added later, with cause:
// the drain timeout has passed.
func (w *watch) drain(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drained = cause
	for _, list := range []*watchList{&w.renewals, &w.renewing} {
		for e := list.head; e != nil; e = e.next {
			e.try.end(cause)
		}
	}
}

// inHand returns the deliveries of the tries still in the watch: after the
// drain, those whose handlers ignored their context (running), and those
// handled whose delete is still under way (settling).
func (w *watch) inHand() (running, settling []*Delivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, list := range []*watchList{&w.renewals, &w.renewing} {
		for e := list.head; e != nil; e = e.next {
			if e.try.settling {
				settling = append(settling, e.try.d)
			} else {
				running = append(running, e.try.d)
			}
		}
	}
	return running, settling
}

// startCall watches c, a call for t that starts at start, for its
// HandlerTimeout, and sets its deadline. A batch item's call comes with a context of its own (see
// handlerCall); any other runs on its try's. When the timeout is longer than the wait for t's first renewal
// (as by default: 10 minutes against 15 s), c only needs watching if t
// lives that long: it is left with t, and the watch files it when t's
// renewal comes due. A message settled before then, which is nearly every
// one, so costs the watch's lock once on its way in and once on its way out.
func (w *watch) startCall(t *try, c *handlerCall, start time.Time) {
	c.try, c.timer.call = t, c
	if w.callLimit == 0 {
		return
	}
	c.deadline = start.Add(w.callLimit)
	// The watch sets renewFired, then reads t.call; this stores t.call,
	// then reads renewFired: at least one of the two sees the other's
	// write, and filing twice is harmless.
	if w.callLimit >= w.renewAfter && t.call.CompareAndSwap(nil, c) && !t.renewFired.Load() {
		return
	}
	w.fileCall(c)
}

// endCall stops watching c, a call for t, which has returned.
func (w *watch) endCall(t *try, c *handlerCall) {
	if w.callLimit == 0 {
		return
	}
	if t.call.CompareAndSwap(c, nil) && !t.renewFired.Load() {
		return // never filed, and now it never will be
	}
	w.mu.Lock()
	if c.timer.in != nil {
		c.timer.in.unlink(&c.timer)
	}
	w.mu.Unlock()
}

// watchBatchCall times out c, a message's call that a batch call took up
// at start, as startCall would have (see callBatch). c's own deadline
// stays unset: the message's goroutine reads it meanwhile, and its
// handler is the batch's, whose context has the deadline.
func (w *watch) watchBatchCall(c *handlerCall, start time.Time) {
	if w.callLimit == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fileCallAt(c, start.Add(w.callLimit))
}

// fileCall puts c in the call list, due at its deadline, unless it is there.
func (w *watch) fileCall(c *handlerCall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fileCallLocked(c)
}

// fileCallLocked is fileCall for a caller that holds w.mu.
func (w *watch) fileCallLocked(c *handlerCall) { w.fileCallAt(c, c.deadline) }

// fileCallAt puts c in the call list, due at due, unless it is there. The
// caller holds w.mu.
func (w *watch) fileCallAt(c *handlerCall, due time.Time) {
	if c.timer.in != nil {
		return
	}
	c.timer.due = due
	early := w.armed.IsZero() || due.Before(w.armed)
	w.calls.insert(&c.timer)
	if early {
		w.kickRun()
	}
}

// kickRun tells the watch's goroutine that a list has a new head.
func (w *watch) kickRun() {
	select {
	case w.kick <- struct{}{}:
	default: // it is already told
	}
}

// add puts e in list, due at due.
func (w *watch) add(list *watchList, e *watchEntry, due time.Time) {
	w.mu.Lock()
	if w.drained != nil && e.try != nil {
		e.try.end(w.drained)
	}
	e.due = due
	early := w.armed.IsZero() || e.due.Before(w.armed)
	list.insert(e)
	w.mu.Unlock()
	if early {
		w.kickRun()
	}
}

// settling marks t, whose handler has succeeded, as being deleted, and
// leaves it in the watch until removeTry: if its first renewal comes due
// before then, the watch has the listener remember it as handled instead of
// renewing it, well before the message could reappear (half its visibility
// timeout early). Most deletes are done long before, and cost the memo
// nothing. If that time has passed already, it reports late: the caller
// remembers the message itself, and stops t's renewer, if the renewals had
// started.
func (w *watch) settling(t *try) (r *renewer, late bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t.settling = true
	return t.renew, t.renewFired.Load()
}

// removeTry takes t out of the watch. It returns t's renewer if the
// renewals had started (the caller stops it), nil if they had not.
func (w *watch) removeTry(t *try) *renewer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.renewAt.in != nil {
		t.renewAt.in.unlink(&t.renewAt)
	}
	return t.renew
}

// run fires entries as they come due until stop is closed.
func (w *watch) run(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	nextTick := time.Now().Add(w.period)
	for {
		now := time.Now()
		if w.tick != nil && !now.Before(nextTick) {
			w.tick()
			nextTick = now.Add(w.period)
		}
		var wait <-chan time.Time
		var tick *time.Time
		if w.tick != nil {
			tick = &nextTick
		}
		next, ok := w.fire(now, tick)
		if ok {
			timer.Reset(time.Until(next))
			wait = timer.C
		}
		select {
		case <-stop:
			return
		case <-w.kick:
		case <-wait:
		}
	}
}

// fire handles every entry due by now and returns when the watch looks
// next: when the next entry is due, or at tick if that is sooner; ok is
// false if neither is. It notes that time as armed.
func (w *watch) fire(now time.Time, tick *time.Time) (next time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() { w.armed = next }()
	for e := w.renewals.head; e != nil && !e.due.After(now); e = w.renewals.head {
		w.renewals.unlink(e)
		w.renewing.insert(e)
		t := e.try
		t.renewFired.Store(true)
		if c := t.call.Load(); c != nil {
			w.fileCallLocked(c) // its deadline is still ahead: see startCall
		}
		switch {
		case t.settling:
			if w.remember != nil {
				w.remember(t)
			}
		case !t.ended(): // an ended try lets its message reappear
			w.startRenew(t)
		}
	}
	for e := w.calls.head; e != nil && !e.due.After(now); e = w.calls.head {
		w.calls.unlink(e)
		again, ended := e.call.expire(w.itemGrace)
		switch {
		case again > 0:
			e.due = now.Add(again)
			w.calls.insert(e)
		case ended && w.timedOut != nil:
			w.timedOut(e.call.try)
		}
	}
	if h := w.renewals.head; h != nil {
		next, ok = h.due, true
	}
	if h := w.calls.head; h != nil && (!ok || h.due.Before(next)) {
		next, ok = h.due, true
	}
	if tick != nil && (!ok || tick.Before(next)) {
		next, ok = *tick, true
	}
	return next, ok
}

// insert puts e in due order, after the entries due at the same time.
func (l *watchList) insert(e *watchEntry) {
	after := l.tail
	for after != nil && after.due.After(e.due) {
		after = after.prev
	}
	e.in, e.prev = l, after
	if after == nil {
		e.next, l.head = l.head, e
	} else {
		e.next, after.next = after.next, e
	}
	if e.next != nil {
		e.next.prev = e
	} else {
		l.tail = e
	}
}

func (l *watchList) unlink(e *watchEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.in, e.prev, e.next = nil, nil, nil
}

// handlerCall is the context of one handler call: a message's, or a batch
// item's. A message's call runs on its try's context, but reports the
// call's deadline (so that a handler can pass it on to what it calls), and
// reports [context.DeadlineExceeded] once the call has run past it. The watch
// then ends the whole try with cause [ErrHandlerTimeout], so that renewals
// stop and the message reappears for another try even if the handler never
// returns.
//
// A batch item's call has a context of its own, under its try's, which the
// watch cancels alone at the item's timeout: the other items of the batch
// run on. An item that has still not returned itemGrace later (it ignores
// its context) is abandoned: the batch goes on, and is settled, without
// waiting for it (see batchRun.abandonItem).
type handlerCall struct {
	// Context is a batch item's own context; nil for a message's call,
	// which runs on its try's (see parent).
	context.Context
	try *try
	// item is a batch item's; nil for a message's call.
	item     *itemCall
	deadline time.Time // zero: none
	timedOut atomic.Bool
	timer    watchEntry
}

// itemCall is what a batch item's call has beside a message's: a context
// of its own to cancel, and the batch that can go on without it.
type itemCall struct {
	cancel context.CancelCauseFunc
	batch  itemAbandoner
	index  int
	// seat counts the item on its way to a batch handler's call with the
	// rest of its batch (see gather.Seat); unused otherwise.
	seat gather.Seat
}

// itemAbandoner is a batch in progress, which can go on without an item.
type itemAbandoner interface{ abandonItem(i int) }

// parent is the context the call runs under: a batch item's own, or, for a
// message's call, its try's, made only now (see tryContext).
func (c *handlerCall) parent() context.Context {
	if c.Context != nil {
		return c.Context
	}
	return c.try.context()
}

// Deadline is the call's deadline (HandlerTimeout after it started).
func (c *handlerCall) Deadline() (time.Time, bool) {
	switch {
	case !c.deadline.IsZero():
		return c.deadline, true
	case c.Context == nil:
		return time.Time{}, false // a try's context has none
	}
	return c.Context.Deadline()
}

// Done is closed when the call's context ends.
func (c *handlerCall) Done() <-chan struct{} { return c.parent().Done() }

// Value is the value the call's context holds for key; a message's call
// answers for its try (see SetGroupResult).
func (c *handlerCall) Value(key any) any {
	if _, ok := key.(tryKey); ok && c.item == nil {
		return c.try
	}
	return c.parent().Value(key)
}

// Err is [context.DeadlineExceeded] once this call has timed out, and the
// context's error otherwise.
func (c *handlerCall) Err() error {
	var err error
	switch {
	case c.Context != nil:
		err = c.Context.Err()
	case c.try.ended():
		err = context.Canceled
	}
	if err != nil && c.timedOut.Load() {
		return context.DeadlineExceeded
	}
	return err
}

// expire acts on a call past its deadline, unless its try has ended. A
// message's call ends its try (ended): its renewals stop, so that its
// message reappears even if the handler never returns. A batch item's is
// cancelled alone, and expire asks to be called again after grace (again):
// if the item is still running then, its batch goes on without it.
func (c *handlerCall) expire(grace time.Duration) (again time.Duration, ended bool) {
	t := c.try
	if t.ended() {
		return 0, false
	}
	if it := c.item; it != nil {
		if !c.timedOut.Swap(true) {
			it.cancel(ErrHandlerTimeout)
			return max(grace, time.Nanosecond), false
		}
		it.batch.abandonItem(it.index)
		return 0, false
	}
	c.timedOut.Store(true)
	t.end(ErrHandlerTimeout)
	return 0, true
}
