package azdispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
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
	startRenew func(*try)    // starts a try's renewals; called under mu

	mu              sync.Mutex
	renewals, calls watchList
	renewing        watchList     // tries whose renewals have started, in no order
	drained         error         // the cause every try has ended with, once drain is called
	kick            chan struct{} // a list has a new head

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
	return &watch{renewAfter: renewAfter, callLimit: max(callLimit, 0), startRenew: startRenew, kick: make(chan struct{}, 1)}
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
// drain, those whose handlers ignored their context.
func (w *watch) inHand() []*Delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*Delivery
	for _, list := range []*watchList{&w.renewals, &w.renewing} {
		for e := list.head; e != nil; e = e.next {
			out = append(out, e.try.d)
		}
	}
	return out
}

// startCall watches c, a call for t, for its HandlerTimeout, and sets its
// deadline. When the timeout is longer than the wait for t's first renewal
// (as by default: 10 minutes against 15 s), c only needs watching if t
// lives that long: it is left with t, and the watch files it when t's
// renewal comes due. A message settled before then, which is nearly every
// one, so costs the watch's lock once on its way in and once on its way out.
func (w *watch) startCall(t *try, c *handlerCall) {
	c.Context, c.try, c.timer.call = t.ctx, t, c
	if w.callLimit == 0 {
		return
	}
	c.deadline = time.Now().Add(w.callLimit)
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

// fileCall puts c in the call list, due at its deadline, unless it is there.
func (w *watch) fileCall(c *handlerCall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fileCallLocked(c)
}

// fileCallLocked is fileCall for a caller that holds w.mu.
func (w *watch) fileCallLocked(c *handlerCall) {
	if c.timer.in != nil {
		return
	}
	c.timer.due = c.deadline
	first := w.calls.head == nil || c.deadline.Before(w.calls.head.due)
	w.calls.insert(&c.timer)
	if first {
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
	first := list.head == nil || e.due.Before(list.head.due)
	list.insert(e)
	w.mu.Unlock()
	if first {
		w.kickRun()
	}
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
		next, ok := w.fire(now)
		if w.tick != nil && (!ok || nextTick.Before(next)) {
			next, ok = nextTick, true
		}
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

// fire handles every entry due by now and returns when the next is due, if
// any is listed.
func (w *watch) fire(now time.Time) (next time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for e := w.renewals.head; e != nil && !e.due.After(now); e = w.renewals.head {
		w.renewals.unlink(e)
		w.renewing.insert(e)
		t := e.try
		t.renewFired.Store(true)
		if c := t.call.Load(); c != nil {
			w.fileCallLocked(c) // its deadline is still ahead: see startCall
		}
		if t.ctx.Err() == nil { // an ended try lets its message reappear
			w.startRenew(t)
		}
	}
	for e := w.calls.head; e != nil && !e.due.After(now); e = w.calls.head {
		w.calls.unlink(e)
		e.call.expire()
	}
	if h := w.renewals.head; h != nil {
		next, ok = h.due, true
	}
	if h := w.calls.head; h != nil && (!ok || h.due.Before(next)) {
		next, ok = h.due, true
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
// item's. It is the try's context, but reports the call's deadline (so that
// a handler can pass it on to what it calls), and reports
// context.DeadlineExceeded once the call has run past it. The watch then
// ends the whole try with cause ErrHandlerTimeout, so that renewals stop and
// the message reappears for another try even if the handler never returns.
type handlerCall struct {
	context.Context // the try's
	try             *try
	deadline        time.Time // zero: none
	timedOut        atomic.Bool
	timer           watchEntry
}

// Deadline is the call's deadline (HandlerTimeout after it started).
func (c *handlerCall) Deadline() (time.Time, bool) {
	if c.deadline.IsZero() {
		return c.Context.Deadline()
	}
	return c.deadline, true
}

// Err is context.DeadlineExceeded once this call has timed out, and the
// try's error otherwise.
func (c *handlerCall) Err() error {
	err := c.Context.Err()
	if err != nil && c.timedOut.Load() {
		return context.DeadlineExceeded
	}
	return err
}

// expire ends the try of a call past its deadline, unless it has ended.
func (c *handlerCall) expire() {
	if c.try.ctx.Err() != nil {
		return
	}
	c.timedOut.Store(true)
	c.try.end(ErrHandlerTimeout)
}
