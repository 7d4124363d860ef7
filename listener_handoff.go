package azdispatch

// How a received message reaches a goroutine that tries it. A dequeuer
// tries the messages of its receive itself, one after another, as a
// minimal receive-and-handle loop would (see tryHere). Once a handler call
// takes slowCall, the rest go to try goroutines (tryPool) to run side by
// side; once none has started for spillAfter, the dequeuer's loop goes to
// a successor goroutine too, so that a slow or hung handler holds up
// neither its receive's other messages nor the next receive. At the end of
// the file: what a handler call holds while it runs (takeHandler).

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/dequeue"
	"github.com/azdispatch/azdispatch/internal/gather"
	"github.com/azdispatch/azdispatch/internal/keylock"
	"github.com/azdispatch/azdispatch/internal/syncx"
)

// tryIdle is about how long a try goroutine with nothing to do waits for
// the next message before it stops (between one and two of these).
const tryIdle = 5 * time.Second

// A role is what a goroutine of the session does next: its function
// returns the role after it, or nil when the goroutine ends (see runRoles).
// A dequeuer's goroutine that spills goes on as a try goroutine, and an
// idle try goroutine takes up the loop of a dequeuer that spilled, each
// from the top of its stack: neither nests in the other, so a long busy
// run does not pile up goroutines or frames.
type role func() role

// runRoles runs r, then the roles it hands on, until one returns nil.
func runRoles(r role) {
	for r != nil {
		r = r()
	}
}

// arrival is one received message for a try goroutine, with the slot it
// gives back to its dequeuer once it is settled. An arrival with no message
// tells the goroutine that takes it to stop, or, with carry set, to go on
// as a dequeuer's successor (see handOn).
type arrival struct {
	d     *Delivery
	carry role
	slots *syncx.Slots
	// received is when the receive that brought d was asked for, and took
	// how long it took to return: the service hid d at some moment between.
	received time.Time
	took     time.Duration
	// turn is when d may start under the rate limit; zero without one.
	turn time.Time
	// group counts the receive's messages on their way to a batch
	// handler's call (see gather.Group); nil otherwise.
	group *gather.Group
}

// tryPool holds the session's try goroutines, which take each message
// through its try and its settling, handler call included. They are reused because a
// new goroutine per message grows its stack afresh each time the message's
// call chain gets deep (runtime.copystack), which cost more CPU than all
// the rest of the listener's work on a message. A goroutine waits for its
// next message on one channel receive, with no timer of its own: the watch
// retires those that stay idle (see retireIdle).
type tryPool struct {
	ch   chan arrival
	idle atomic.Int64 // goroutines waiting on ch now

	mu         sync.Mutex // orders retireIdle's sends before close
	closed     bool
	idleBefore int64 // how many waited at the previous look
}

// startTry gives r to an idle try goroutine, or starts one.
func (l *Listener[T]) startTry(s *session, r arrival) {
	select {
	case s.tries.ch <- r:
	default:
		s.handlers.Add(1)
		go runRoles(func() role {
			defer s.handlers.Done()
			return l.tryLoop(s, r)
		})
	}
}

// tryLoop takes r through its try, then whatever else is given to it, until
// it is told to stop, or the channel is closed at the end of the session,
// or it is given a dequeuer's loop to carry on: the role it returns.
func (l *Listener[T]) tryLoop(s *session, r arrival) role {
	for ; r.d != nil; r = s.tries.await() {
		l.tryDelivery(s, r) // gives back r's slot, whatever becomes of its goroutine
	}
	return r.carry
}

// await waits for the next message for a try goroutine: one with no
// message says to stop.
func (w *tryPool) await() arrival {
	w.idle.Add(1)
	defer w.idle.Add(-1)
	return <-w.ch
}

// retireIdle stops as many try goroutines as were idle both now and at
// the previous look, tryIdle ago: a listener that has been quiet keeps
// none, and a busy one keeps those it keeps using. It is called every
// tryIdle by the watch.
func (w *tryPool) retireIdle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	now := w.idle.Load()
	n := min(now, w.idleBefore)
	w.idleBefore = now - n
	for range n {
		select {
		case w.ch <- arrival{}:
		default: // it took work meanwhile; it may go next time
			return
		}
	}
}

// close tells every waiting try goroutine to stop, and those still
// working to stop once they are done. Only once no dequeuer is left, since
// a dequeuer gives messages on the channel.
func (w *tryPool) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	close(w.ch)
}

// spillAfter is how long a dequeuer goes on trying the messages of one
// receive on its own goroutine while none of them starts: then it gives
// the rest to try goroutines and its loop to a successor. Handlers that
// take microseconds run as in a minimal receive-and-handle loop, with no
// goroutine between the receive and the handler (which is most of what
// such a loop saves: waking another goroutine, on another core, for each
// message); a slow handler, a wait for a rate limit's turn, or a handler
// that hangs holds up the rest of its receive by one to two of these, and
// the next receive not at all. Progress is what counts, not the batch's
// time, so that a busy machine, which slows every message, does not spill
// batches of fast ones.
const spillAfter = 500 * time.Microsecond

// slowCall is how long a handler call takes before the dequeuer gives the
// rest of its receive to try goroutines at once, rather than call them one
// after another: handlers that take this long are likely to wait on
// something, or to be worth a core each.
const slowCall = 100 * time.Microsecond

// States of an inlineRun.
const (
	runIdle     int32 = iota // between receives
	runTrying                // its dequeuer's goroutine tries its messages
	runFinished              // they were all tried there
	runSpilled               // spill took the rest and handed the loop on
)

// inlineRun is one receive's messages as its dequeuer tries them itself,
// and the timer that spills them if that takes too long.
type inlineRun struct {
	arrivals []arrival
	pos      atomic.Int32 // the next not yet taken
	seen     atomic.Int32 // pos at spill's last look
	state    atomic.Int32
	timer    *time.Timer
	// next and result are what the dequeuer does after the receive: a
	// successor starts with them.
	next   dequeue.Step
	result receiveResult
	// spilled has a value once spill has done all it will do (taken the
	// rest and started the successor, or found the run over), unless it
	// set the timer again.
	spilled chan struct{}
}

// take returns the next message nobody has taken yet.
func (run *inlineRun) take() (arrival, bool) {
	i := int(run.pos.Add(1)) - 1
	if i >= len(run.arrivals) {
		return arrival{}, false
	}
	return run.arrivals[i], true
}

// tryHere tries the messages of a receive on the dequeuer's goroutine, one
// after another, and returns nil. After a handler call of slowCall or more,
// the rest go to try goroutines and tryHere returns. If none starts for
// spillAfter, spill gives the rest to try goroutines and a successor goes
// on with next; this goroutine finishes the try it is in, and tryHere
// returns its role from then on: a try goroutine's.
func (dq *dequeuer[T]) tryHere(batch []arrival, next dequeue.Step, r receiveResult) role {
	if dq.l.batch != nil {
		// A batch handler's messages wait for one another: each waits on
		// a goroutine of its own.
		for _, a := range batch {
			dq.l.startTry(dq.s, a)
		}
		return nil
	}
	run := dq.run
	if run == nil {
		run = &inlineRun{spilled: make(chan struct{}, 1)}
		run.timer = time.AfterFunc(time.Hour, func() { dq.spill(run) })
		run.timer.Stop()
		dq.run = run
	}
	run.arrivals, run.next, run.result = batch, next, r
	run.pos.Store(0)
	run.seen.Store(0)
	run.state.Store(runTrying) // publishes the fields above to spill
	run.timer.Reset(spillAfter)
	l, s := dq.l, dq.s
	exited := true
	defer func() {
		if exited {
			dq.afterGoexit(run)
		}
	}()
	finished := false
	for a, ok := run.take(); ok; a, ok = run.take() {
		if l.tryDelivery(s, a) >= slowCall && int(run.pos.Load()) < len(run.arrivals) {
			// Handlers this slow run side by side: the rest go to try
			// goroutines now, and the dequeuer receives again (unless
			// spill has just taken them).
			if finished = run.state.CompareAndSwap(runTrying, runFinished); finished {
				for a, ok := run.take(); ok; a, ok = run.take() {
					l.startTry(s, a)
				}
			}
			break
		}
	}
	exited = false
	if finished || run.state.CompareAndSwap(runTrying, runFinished) {
		if !run.timer.Stop() {
			<-run.spilled // a spill that came too late: let it end before the run is reused
		}
		run.arrivals = nil
		return nil
	}
	<-run.spilled
	// Waiting among the try goroutines, this one must not keep the
	// receive's messages alive.
	run.arrivals = nil
	return func() role {
		defer s.handlers.Done() // counted by spill
		return l.tryLoop(s, s.tries.await())
	}
}

// afterGoexit runs as the dequeuer's goroutine ends because a handler it
// called ended it with runtime.Goexit (its message is settled as a failed
// call): the rest of the receive and the dequeuer's loop go on as after a
// spill, the loop's count in session.dequeuers passing to the successor.
func (dq *dequeuer[T]) afterGoexit(run *inlineRun) {
	if run.state.CompareAndSwap(runTrying, runSpilled) {
		run.timer.Stop() // one that fired anyway finds the run spilled
		dq.handOn(run)
		return
	}
	// spill came first: it counted this goroutine as a handler.
	<-run.spilled
	dq.s.handlers.Done()
}

// spill looks at the run every spillAfter while the dequeuer tries its
// receive's messages. If none started since the last look, it gives those
// not yet taken to try goroutines, and the dequeuer's loop, with its count
// in session.dequeuers, to a new goroutine; the goroutine that was trying
// counts as a handler from now.
func (dq *dequeuer[T]) spill(run *inlineRun) {
	if run.state.Load() == runTrying {
		if pos := run.pos.Load(); pos != run.seen.Load() {
			// Rarely, the run finishes and stops the timer between the
			// load and this: it then waits for the next look, which finds
			// it finished.
			run.seen.Store(pos)
			run.timer.Reset(spillAfter)
			return
		}
	}
	defer func() { run.spilled <- struct{}{} }()
	if !run.state.CompareAndSwap(runTrying, runSpilled) {
		return
	}
	// The goroutine trying goes on as a try goroutine: counted in handlers
	// before the successor can end, and with it the wait for dequeuers.
	dq.s.handlers.Add(1)
	dq.handOn(run)
}

// handOn gives the messages of run nobody has taken to try goroutines, and
// the dequeuer's loop to an idle try goroutine, or a new one, which goes on
// from the step after the run's receive with a new run and buffer of its
// own (the goroutine that was trying keeps the old ones). An idle one is
// taken first: on a busy machine a dequeuer that is merely waiting for a
// core looks like one whose handler hangs, and spills, and a new goroutine
// for each such spill would pile up idle ones faster than retireIdle stops
// them, each a stack for the garbage collector to scan.
func (dq *dequeuer[T]) handOn(run *inlineRun) {
	l, s := dq.l, dq.s
	for a, ok := run.take(); ok; a, ok = run.take() {
		l.startTry(s, a)
	}
	dq.run, dq.arrivals = nil, nil
	successor := arrival{carry: func() role {
		return dq.carryOn(func() bool { return dq.follow(run.next, run.result) })
	}}
	select {
	case s.tries.ch <- successor: // the dequeuers' count, held by the loop, keeps ch open
	default:
		go runRoles(successor.carry)
	}
}

// What a handler call holds while it runs: a unit of the listener's
// handler semaphore, and places of the limits across processes.

// takeHandler waits for what a handler call holds: with Limits.Classes a
// place of the class of the try's key, then one unit of the listener's
// handler semaphore (which single messages and the items of batches
// share), then with Limits.Fleet a place of the fleet's; always in this
// order, so that no two calls wait for each other. It fails with
// errNotStarted when Run's context ends first, or with the try's cause;
// what it got then is given back. giveHandler gives back what it returns.
// With crowd above 0, no more than crowd (or the class's Fleet, if less)
// wait in hand for a place of a class: the next fails with
// keylock.ErrCrowded, and is snoozed, so that a class at its limit does
// not fill the slots the other keys need.
func (l *Listener[T]) takeHandler(t *try, crowd int) (handlerHold, error) {
	var h handlerHold
	if c := classOf(l.opts.Limits.Classes, t.key); c >= 0 {
		place, err := l.takePlace(t, l.classes[c], min(crowd, l.opts.Limits.Classes[c].Fleet))
		if err != nil {
			return handlerHold{}, err
		}
		h.classes, h.class = l.classes[c], place
	}
	if err := l.takeLocalHandler(t); err != nil {
		l.giveHandler(h)
		return handlerHold{}, err
	}
	h.local = true
	if l.fleet != nil {
		place, err := l.takePlace(t, l.fleet, 0)
		if err != nil {
			l.giveHandler(h)
			return handlerHold{}, err
		}
		h.fleet = place
	}
	return h, nil
}

// handlerHold is what one handler call holds (see takeHandler).
type handlerHold struct {
	local   bool           // a unit of the handler semaphore
	fleet   *keylock.Place // of Limits.Fleet
	class   *keylock.Place // of classes, the key's class's pool
	classes *keylock.Pool
}

// giveHandler gives back what takeHandler took, in the reverse order.
func (l *Listener[T]) giveHandler(h handlerHold) {
	if h.fleet != nil {
		l.fleet.Put(h.fleet)
	}
	if h.local {
		l.handlers.Release(1)
	}
	if h.class != nil {
		h.classes.Put(h.class)
	}
}

// takePlace waits for a place of pool for t's call, unless crowd (if not
// 0) wait already (keylock.ErrCrowded). It fails with errNotStarted when
// Run's context ends first, or with the try's cause; a place it got then is
// given back.
func (l *Listener[T]) takePlace(t *try, pool *keylock.Pool, crowd int) (*keylock.Place, error) {
	ctx, done := t.untilRunEnds()
	var place *keylock.Place
	var err error
	if crowd > 0 {
		place, err = pool.GetUnlessCrowded(ctx, crowd)
	} else {
		place, err = pool.Get(ctx)
	}
	done()
	if errors.Is(err, keylock.ErrCrowded) {
		return nil, err
	}
	if err == nil {
		if t.s.run.Err() == nil && !t.ended() {
			return place, nil
		}
		pool.Put(place)
	}
	if t.ended() {
		return nil, t.cause()
	}
	return nil, errNotStarted
}

// takeLocalHandler is takeHandler's wait for the listener's own handler
// semaphore.
func (l *Listener[T]) takeLocalHandler(t *try) error {
	if !l.handlers.TryAcquire(1) {
		// Only a wait makes a context of its own: it ends with the try's
		// or with Run's.
		ctx, done := t.untilRunEnds()
		err := l.handlers.Acquire(ctx, 1)
		done()
		if err != nil {
			if t.ended() {
				return t.cause()
			}
			return errNotStarted
		}
	}
	switch {
	case t.s.run.Err() != nil:
		l.handlers.Release(1)
		return errNotStarted
	case t.ended():
		l.handlers.Release(1)
		return t.cause()
	}
	return nil
}
