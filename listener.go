package azdispatch

// The listener's engine, and the goroutines it runs. A message is received
// by a dequeuer, tried (the stages of one delivery's way: due line,
// metadata, payload, decode, handler) and settled (deleted, hidden again to
// reappear later, or poisoned): receive, try and settle are the engine's
// three verbs, each in files of its own (listener_dequeue.go, listener_try.go,
// listener_outcome.go); how a received message reaches the goroutine that
// tries it is in listener_handoff.go, and when a message reappears is noted
// in one place (listener_reappear.go).
//
// Every goroutine a [Listener.Run] starts, and who waits for it:
//
//   - Run itself (superviseDequeuers): starts dequeuers when asked
//     (scale-up, Notify, a due time with none running), watches for
//     FatalTimeout, and shuts down.
//   - The watch (one per Run; listener_watch.go): starts renewals at half a
//     message's visibility timeout, times out handler calls, retires idle
//     try goroutines. Run stops it and waits for it (watching) as it
//     returns, after everything else.
//   - Dequeuers (MinDequeuers..MaxDequeuers; runDequeuer): receive, and try
//     what came themselves, one message after another (tryHere). Run's
//     shutdown waits for them first (session.dequeuers); only Run starts
//     them, so none starts after that, but a dequeuer's loop may move to a
//     successor goroutine, which takes over its count (below).
//   - A dequeuer's spill (one time.AfterFunc per dequeuer, set again for
//     each receive; spill): when none of the receive's messages has started
//     for spillAfter, it gives the rest to try goroutines and the loop to a
//     successor goroutine (handOn), and counts the goroutine still trying
//     in session.handlers. The dequeuer stops it, or waits for it, before
//     its next receive.
//   - Try goroutines (tryPool; tryLoop): each takes a message through its
//     try and its settling, then waits for the next; the watch retires those
//     idle for tryIdle, and the shutdown closes the pool once no dequeuer is
//     left. Counted in session.handlers, which the shutdown waits for next,
//     up to the drain timeout and abandonAfter.
//   - Batch items (one goroutine per item running, tryItems), abandoned
//     items' outcomes (abandonItem) and messages made visible at once at
//     shutdown (reappearNow): also counted in session.handlers.
//   - A batch's checkpoint ticker (checkpointEvery), when CheckpointInterval
//     is set: stopped and waited for by its batch's try.
//   - Renewals (one time.AfterFunc per message still in hand at half its
//     visibility timeout; renewer): stopped by settle, which waits for one
//     in flight.
//   - The shutdown's waiter (one goroutine per wait group waited for): ends
//     when the group it waits for does.
//   - Short-lived context.AfterFunc callbacks for waits that end with the
//     try's or Run's context (untilRunEnds): released by the wait.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/azdispatch/azdispatch/internal/backoff"
	"github.com/azdispatch/azdispatch/internal/cputime"
	"github.com/azdispatch/azdispatch/internal/dequeue"
	"github.com/azdispatch/azdispatch/internal/health"
	"github.com/azdispatch/azdispatch/internal/keygate"
	"github.com/azdispatch/azdispatch/internal/keylock"
	"github.com/azdispatch/azdispatch/internal/memo"
	"github.com/azdispatch/azdispatch/internal/pause"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/ratelimit"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/syncx"
)

// Listener receives messages from a [Source], decodes them into T and runs a
// handler for each, at least once. Create one with [NewListener] and start it
// with [Listener.Run].
//
// Its receive loops (dequeuers) scale with the work: from
// [ScalingOptions.MinDequeuers] when the queue is empty, up to
// [ScalingOptions.MaxDequeuers] as the queue's depth calls for and the
// process's cores allow, and back down as they go idle. Each dequeuer hands its messages to up to
// [ListenerOptions.Concurrency] handler goroutines.
type Listener[T any] struct {
	src     Source
	caps    Capabilities // what src can do, read once
	poison  Capabilities // what opts.PoisonQueue can do, read once
	handler Handler[T]
	opts    ListenerOptions // defaults filled in
	decoder Codec           // opts.Codec, or the default JSON read in place (see bodyDecoder)
	limits  payload.Limits  // opts.Payloads.Limits, as the payload format takes them
	log     *slog.Logger
	alerts  func() *slog.Logger // log, or slog.Default when no Logger was set: for what needs a person

	floor     int // dequeuers kept when idle: MinDequeuers, or 0 when PushOnly
	threshold int // free slots a dequeuer needs before receiving again
	scale     dequeue.Scaler
	wake      *syncx.Signal
	want      atomic.Int64  // dequeuers asked for, read by Run
	asked     chan struct{} // tells Run that want changed, or that the last dequeuer stopped
	// due holds when messages the listener let go of are visible again:
	// dequeuers shorten their back-off to it, and Run starts one for it
	// when none is left (PushOnly).
	due syncx.DueTimes
	// seats are the listener's MaxDequeuers sets of slots (Concurrency
	// each, twice that with a key limit: see ListenerOptions.inHand), one
	// per dequeuer running. A message holds a slot of its dequeuer's seat
	// until it is settled, and a dequeuer that stops leaves its seat, with
	// the slots still held, to the next: the listener never holds more
	// than MaxDequeuers seats of messages, however often its dequeuers
	// stop and start.
	seats chan *syncx.Slots
	// handlers holds one unit per handler call running, single messages
	// and batch items alike. Slots bound the messages in hand; this bounds
	// the calls, so that the items of batches, which run while their
	// message holds one slot, do not take the listener past
	// MaxDequeuers × Concurrency handlers at once.
	handlers *semaphore.Weighted
	gate     *ratelimit.Gate // books RateLimit's turns before each receive; nil without one
	paused   *pause.Gate     // holds receives while the source is paused; nil if it cannot be
	memo     *memo.Memo      // handled, not yet deleted
	budget   *payload.Budget
	health   health.Record[Op]
	stats    stats
	// mw is the handler middleware, outermost first; storage are those of
	// them that wrap storage requests too. invoke and doStorage are the
	// ends of their chains, made once rather than per call.
	mw        []Middleware
	storage   []StorageMiddleware
	invoke    func(ctx context.Context, c *Call) error
	doStorage func(ctx context.Context, op *StorageOp) error
	tx        counter
	running   atomic.Bool
	// hop is the longest the service hides a message: MaxVisibility, or
	// less in this package's tests, which cannot wait a week.
	hop time.Duration
	// records is where the occurrences of schedules delivered are marked
	// (see deliverOnce); nil if the source keeps none.
	records records.Store
	// keys, keyLocks and fleet hold the places of Limits.PerKey, of
	// Limits.AcrossInstances and of Limits.Fleet; nil without them.
	keys     *keygate.Gate
	keyLocks *keylock.Locks
	fleet    *keylock.Pool
	// reruns counts the runs of handled messages whose order could not be
	// recorded (see orderUnrecorded).
	reruns reruns
	// classes hold this listener's places under Limits.Classes, one pool
	// per class, in its order.
	classes []*keylock.Pool
	// batch is a batch listener's (see NewBatchListener); nil otherwise.
	batch *batcher[T]
	// clock is the local clock, read for a delivery whose source does not
	// give the service's time of its receive; time.Now but in tests that
	// skew it, to show that nothing else depends on it.
	clock func() time.Time
	// cores makes each Run's gauge of whether the process fills its cores
	// (see dequeuer.cpuRoom): cputime.NewGauge but in tests that must not
	// depend on how busy their machine is.
	cores func() *cputime.Gauge
}

// session is what one call of Run shares with everything it starts.
type session struct {
	// run is Run's context, counting the listener's transactions: when it
	// ends, nothing further is received or started.
	run context.Context
	// work outlives run, so that a shutdown lets running handlers finish and
	// settles what they did; the drain timeout ends it (cause [ErrDrainTimeout]).
	work context.Context
	// detached is work without its cancellation: the parent of every try's
	// context, which the watch ends at the drain timeout instead (see
	// watch.drain), so that a try's context is not registered with, and
	// later removed from, one parent shared by every message.
	detached context.Context
	// dequeuers counts the goroutines running dequeuers' loops; handlers
	// those that take messages to their end. A dequeuer that hands its
	// loop to a successor (see dequeuer.tryHere) passes its count in
	// dequeuers on, and its goroutine goes on counted in handlers.
	dequeuers sync.WaitGroup
	handlers  sync.WaitGroup
	// tries are the goroutines that take received messages through their
	// tries (see startTry); the channel is closed once no dequeuer is left.
	tries tryPool
	// watch renews messages that run long and times out handler calls.
	watch *watch
	// settle hands out the contexts of deletes, releases, renewals and
	// poison moves: they keep the session's values (its transaction
	// counter) but not its cancellation, so that a shutdown settles what it
	// finished, and end settleTimeout after.
	settle syncx.Deadlines
	// cores tells whether the process has lately filled its cores, from
	// the start of Run (see dequeuer.cpuRoom).
	cores *cputime.Gauge
}

// settleTimeout bounds a delete, release, renewal or poison move.
const settleTimeout = 30 * time.Second

// NewListener returns a listener that runs handler for every message from
// source. Nil opts means defaults; an invalid field is reported as a
// [*ConfigError] naming it.
func NewListener[T any](source Source, handler Handler[T], opts *ListenerOptions) (*Listener[T], error) {
	if handler == nil {
		return nil, &ConfigError{Field: "handler", Reason: "nil"}
	}
	if opts != nil && opts.Batch != (BatchOptions{}) {
		return nil, badListenerOption("Batch", "is for a batch handler: see NewBatchListener")
	}
	return newListener(source, handler, opts)
}

// newListener is a listener with handler, or, for NewBatchListener, a nil
// handler and a batcher it sets.
func newListener[T any](source Source, handler Handler[T], opts *ListenerOptions) (*Listener[T], error) {
	if source == nil {
		return nil, &ConfigError{Field: "source", Reason: "nil"}
	}
	caps := CapabilitiesOf(source)
	o, err := opts.withDefaults(source, caps)
	if err != nil {
		return nil, err
	}
	if err := checkCodecType[T](o.Codec); err != nil {
		return nil, &ConfigError{Field: "ListenerOptions.Codec", Reason: err.Error()}
	}
	floor := o.Scaling.MinDequeuers
	if o.Scaling.PushOnly {
		floor = 0
	}
	l := &Listener[T]{
		src: source, caps: caps, poison: CapabilitiesOf(o.PoisonQueue), handler: handler, opts: o, decoder: bodyDecoder[T](o.Codec), limits: payload.Limits(o.Payloads.Limits),
		log:       o.Logger.With("source", source.Name()),
		alerts:    alertLogger(o, source.Name()),
		floor:     floor,
		threshold: min(o.Scaling.BatchSize, max(1, o.Concurrency/2)),
		scale:     dequeue.Scaler{Interval: o.Scaling.ScaleInterval, Min: floor, Max: o.Scaling.MaxDequeuers},
		wake:      syncx.NewSignal(),
		asked:     make(chan struct{}, 1),
		seats:     make(chan *syncx.Slots, o.Scaling.MaxDequeuers),
		handlers:  semaphore.NewWeighted(int64(o.Scaling.MaxDequeuers * o.Concurrency)),
		memo:      memo.New(),
		records:   recordsOf(o.Payloads.Store),
		budget:    payload.NewBudget(o.Payloads.Memory, payload.GCPercent()),
		hop:       MaxVisibility,
		clock:     time.Now,
		cores:     cputime.NewGauge,
	}
	l.paused = l.pauseGate()
	if o.Limits.PerKey > 0 {
		l.keys = keygate.New(o.Limits.PerKey, o.Limits.Line)
		if o.Limits.AcrossInstances {
			l.keyLocks = keylock.New(o.Payloads.Store.blobs, "keys/"+source.Name(), o.Limits.PerKey, keyLease, l.leaseLost)
		}
	}
	if o.Limits.Fleet > 0 {
		locks := keylock.New(o.Payloads.Store.blobs, "fleet/"+source.Name(), o.Limits.Fleet, keyLease, l.leaseLost)
		l.fleet = keylock.NewPool(locks, "handlers", fleetIdle, fleetHold)
	}
	for _, c := range o.Limits.Classes {
		locks := keylock.New(o.Payloads.Store.blobs, "classes/"+source.Name(), c.Fleet, keyLease, l.leaseLost)
		l.classes = append(l.classes, keylock.NewPool(locks, c.Prefix, fleetIdle, fleetHold))
	}
	for range o.Scaling.MaxDequeuers {
		l.seats <- syncx.NewSlots(o.inHand())
	}
	if o.Scaling.RateLimit != nil {
		l.gate = ratelimit.New(o.Scaling.RateLimit, min(rateHorizon, o.VisibilityTimeout/8), o.VisibilityTimeout/4)
	}
	if len(o.Middleware) > 0 {
		l.mw = slices.Clone(o.Middleware)
		l.invoke = l.invokeHandler
		for _, m := range o.Middleware {
			if sm, ok := m.(StorageMiddleware); ok {
				l.storage = append(l.storage, sm)
			}
		}
		l.doStorage = l.storageRequest
	}
	return l, nil
}

// State returns the listener's counters now.
func (l *Listener[T]) State() State {
	s := l.stats.snapshot()
	s.Transactions = l.tx.snapshot()
	s.LastError, s.LastErrorAt = l.health.Last()
	s.Fatal, s.FatalSince = l.health.Fatal(time.Now())
	s.PayloadBytes = l.budget.Held()
	s.Paused, _ = l.Paused()
	return s
}

// Notify tells the listener that work was sent: dequeuers backing off on an
// empty queue receive at once, and if none is running
// ([ScalingOptions.PushOnly]) one starts. It makes no request itself and never
// blocks. Sends through the listener's own [*Queue] in this process, and
// wake-ups from [ScalingOptions.Wake], call it.
func (l *Listener[T]) Notify() {
	l.stats.wakes.Add(1)
	// Only a wake-up that ends a back-off or starts a dequeuer is an event:
	// a stream of sends to a busy listener would otherwise be one per send.
	active, idle := l.stats.active.Load(), l.stats.idle.Load()
	l.wake.Broadcast()
	if active == 0 {
		l.ask(1)
	}
	if active == 0 || idle > 0 {
		l.event(Event{Kind: EventWoken, Dequeuers: int(active)})
	}
}

// Run receives and handles messages until ctx ends, then shuts down: it stops
// receiving, makes visible again at once what was received but not started
// (a batch starts no further item and is released once its running items
// end, with a checkpoint of what they did), lets running handlers finish for
// up to [ListenerOptions.DrainTimeout], then cancels their contexts and waits
// for them. It returns only when every goroutine it started has stopped: nil
// after a shutdown, [ErrAlreadyRunning] if the listener is running already. The
// one exception is a handler that ignores its cancelled context: 10 s after the
// drain timeout Run returns without it, with an error matching
// [ErrHandlersAbandoned] that names its message. Storage errors do not end Run;
// they are logged, counted in [State] and retried after a back-off (at least as
// long as the service's Retry-After). A fatal one ([ErrFatal]: a refused
// credential, a deleted queue) is also reported as [EventFatal], in
// [State.Fatal] and by [Listener.Ready]; with [ListenerOptions.FatalTimeout]
// set, Run shuts down as above once one has stood that long, and returns it.
func (l *Listener[T]) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer l.running.Store(false)
	if l.fleet != nil {
		defer l.fleet.Release() // last: every handler is done
	}
	for _, c := range l.classes {
		defer c.Release()
	}

	// Run's own cancellation, for a FatalTimeout to end what ctx would.
	ctx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	s := &session{run: countIn(ctx, &l.tx), tries: tryPool{ch: make(chan arrival)}, cores: l.cores()}
	if l.opts.CreateQueue {
		if err := l.createQueue(s.run); err != nil || s.run.Err() != nil {
			return err
		}
	}
	work, stopWork := context.WithCancelCause(context.WithoutCancel(s.run))
	defer stopWork(nil)
	s.work = work
	s.detached = context.WithoutCancel(work)
	s.settle.Base, s.settle.Timeout = s.detached, settleTimeout
	defer s.settle.Stop()
	defer l.startWatch(s)()
	if l.batch != nil {
		l.startGathering(s)
	}

	if l.caps.Subscribe != nil {
		defer l.caps.Subscribe(l.Notify)()
	}
	if l.opts.Scaling.Wake != nil && !sameValue(l.opts.Scaling.Wake, l.src) {
		defer l.opts.Scaling.Wake.Subscribe(l.Notify)()
	}
	return l.superviseDequeuers(ctx, s, stopRun, stopWork)
}

// superviseDequeuers is Run's loop: it starts the dequeuers asked for, one
// for messages let go of that come due while none runs, and the shutdown
// when ctx ends or a fatal error has stood for FatalTimeout (then it calls
// stopRun). Only this goroutine starts dequeuers, so that none starts once
// the shutdown has begun to wait for them.
func (l *Listener[T]) superviseDequeuers(ctx context.Context, s *session, stopRun context.CancelFunc, stopWork context.CancelCauseFunc) error {
	l.ask(max(l.floor, 1))
	var fatalCheck <-chan time.Time
	if l.opts.FatalTimeout > 0 {
		t := time.NewTicker(l.fatalCheckEvery())
		defer t.Stop()
		fatalCheck = t.C
	}
	dueTimer := time.NewTimer(time.Hour)
	defer dueTimer.Stop()
	for {
		// With no dequeuer left (PushOnly), nothing receives the messages
		// the listener let go of when they are due: start one then.
		// While dequeuers run, a change of the due times is theirs to
		// hear (see sleepIdle): Run does not take the signal.
		var due <-chan time.Time
		var changed <-chan struct{}
		if l.stats.active.Load() == 0 {
			changed = l.due.Changed()
			if next, ok := l.due.Next(); ok {
				dueTimer.Reset(time.Until(next))
				due = dueTimer.C
			}
		}
		select {
		case <-due:
			l.ask(1)
		case <-changed:
		case <-ctx.Done():
			return l.shutdown(s, stopWork)
		case now := <-fatalCheck:
			if err := l.fatalTooLong(now); err != nil {
				l.alerts().Error("stopping: a fatal storage error stood for FatalTimeout", "err", err)
				stopRun()
				return errors.Join(err, l.shutdown(s, stopWork))
			}
		case <-l.asked:
			want := min(int(l.want.Swap(0)), l.opts.Scaling.MaxDequeuers)
			for int(l.stats.active.Load()) < want {
				l.stats.started()
				s.dequeuers.Add(1)
				go l.runDequeuer(s) // Done by its loop's last goroutine (see dequeuer.carryOn)
			}
		}
	}
}

// startWatch starts the session's watch (see watch) on a goroutine of its
// own; the function it returns stops it and waits for it.
func (l *Listener[T]) startWatch(s *session) (stop func()) {
	s.watch = newWatch(l.opts.VisibilityTimeout/2, l.opts.HandlerTimeout, func(t *try) { t.renew = l.startRenewer(t) })
	s.watch.timedOut = l.expectReappearance
	s.watch.remember = func(t *try) { l.memo.Remember(t.d.ID, t.d.Text, memo.Handled, t.resultNote()) }
	s.watch.every(tryIdle, s.tries.retireIdle)
	var watching sync.WaitGroup
	stopWatch := make(chan struct{})
	watching.Go(func() { s.watch.run(stopWatch) })
	return func() {
		close(stopWatch)
		watching.Wait()
	}
}

// abandonAfter is how long Run waits, past the drain timeout, for handlers
// that ignore their cancelled context before it returns without them.
const abandonAfter = 10 * time.Second

// shutdown waits for the dequeuers, then for the handlers. The drain timeout
// counts from the moment Run's context ended; when it expires the handlers'
// contexts are cancelled, and shutdown waits abandonAfter more for them.
// Handlers still running then ignore their context: shutdown returns an
// error naming their messages, and leaves them running (a goroutine cannot
// be stopped from outside); each settles its message if it ever returns,
// and its message reappears after its visibility timeout meanwhile.
func (l *Listener[T]) shutdown(s *session, stopWork context.CancelCauseFunc) error {
	if l.batch != nil {
		l.stopGathering()
	}
	drain := time.NewTimer(max(l.opts.DrainTimeout, 0))
	defer drain.Stop()
	abandon := time.NewTimer(time.Hour)
	abandon.Stop()
	defer abandon.Stop()
	// wait reports whether wg finished before abandonAfter past the drain
	// timeout, or finished at all if it may not be abandoned.
	wait := func(wg *sync.WaitGroup, mayAbandon bool) bool {
		done := make(chan struct{})
		go func() { // owned by wg's goroutines: it ends when the last of them does
			wg.Wait()
			close(done)
		}()
		var giveUp <-chan time.Time
		if mayAbandon {
			giveUp = abandon.C
		}
		for {
			select {
			case <-done:
				return true
			case <-drain.C:
				stopWork(ErrDrainTimeout)
				s.watch.drain(ErrDrainTimeout)
				abandon.Reset(abandonAfter)
			case <-giveUp:
				return false
			}
		}
	}
	// Only dequeuers start try goroutines: wait for them first, to the
	// end (a receive is bounded by receiveTimeout).
	wait(&s.dequeuers, false)
	s.tries.close() // nothing more is given out: idle try goroutines stop
	if wait(&s.handlers, true) {
		return nil
	}
	stuck, deleting := s.watch.inHand()
	for _, d := range stuck {
		l.msgLog(d).Error("handler ignored its cancelled context; Run returns without it", "queue", d.Queue)
	}
	// A handled message whose delete (retried by the SDK against a
	// throttled account, say) outlasts the wait is deleted if its request
	// ever succeeds, and delivered again otherwise.
	return fmt.Errorf("%w: %v after the drain timeout, %d handler(s) still running (messages %v) and %d handled message(s) still being deleted (%v)",
		ErrHandlersAbandoned, abandonAfter, len(stuck), idsOf(stuck), len(deleting), idsOf(deleting))
}

// idsOf lists the IDs of ds.
func idsOf(ds []*Delivery) []string {
	ids := make([]string, 0, len(ds))
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	return ids
}

// ask requests that n dequeuers run; Run starts the missing ones.
func (l *Listener[T]) ask(n int) {
	for {
		w := l.want.Load()
		if int64(n) <= w || l.want.CompareAndSwap(w, int64(n)) {
			break
		}
	}
	select {
	case l.asked <- struct{}{}:
	default: // Run has a request pending: it reads the latest want
	}
}

// event passes e to the OnEvent hook, if any.
func (l *Listener[T]) event(e Event) {
	if l.opts.OnEvent != nil {
		l.opts.OnEvent(e)
	}
}

// sameValue reports whether a and b hold the same comparable value, without
// panicking on values that are not comparable.
func sameValue(a, b any) (same bool) {
	defer func() { _ = recover() }()
	return a == b
}

// createQueue creates the source's queue, for [ListenerOptions.CreateQueue],
// trying again after a back-off until it succeeds or ctx ends (nil), or a
// fatal error has stood for FatalTimeout (that error).
func (l *Listener[T]) createQueue(ctx context.Context) error {
	create := l.caps.Create // checked by NewListener
	for failures := int64(1); ; failures++ {
		err := create(ctx)
		if err == nil {
			l.storageSucceeded(opCreate)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		l.storageFailed(err)
		if err := l.fatalTooLong(time.Now()); err != nil {
			return err
		}
		l.log.Warn("creating the queue failed", "err", err, "failures", failures)
		wait := hintedWait(err, backoff.Retry(250*time.Millisecond, 30*time.Second, failures, rand.Float64()))
		if l.opts.FatalTimeout > 0 {
			wait = min(wait, l.fatalCheckEvery())
		}
		if !syncx.Sleep(ctx, wait, nil) {
			return nil
		}
	}
}

// alertLogger returns where a listener logs what needs a person: its
// Logger, or, when none was set, slog.Default as it is when the line is
// written (a program may set it after making the listener).
func alertLogger(o ListenerOptions, source string) func() *slog.Logger {
	if !o.alertsToDefault {
		l := o.Logger.With("source", source)
		return func() *slog.Logger { return l }
	}
	return func() *slog.Logger { return slog.Default().With("source", source) }
}

// inHand is how many messages one dequeuer has in hand at most: its
// Concurrency, and as many again with a key limit or classes. A message
// that waits for its key, or its class's place, holds a slot without
// running; without the second half, a
// receive whose messages share keys, or wait for a key's lease round trip,
// would leave handlers idle (the keys load scenario ran at 0.57 of its
// unlimited rate). Handler calls stay bounded by the handler semaphore.
func (o ListenerOptions) inHand() int {
	if o.Limits.PerKey > 0 || len(o.Limits.Classes) > 0 {
		return 2 * o.Concurrency
	}
	return o.Concurrency
}
