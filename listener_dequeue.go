package azdispatch

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/azdispatch/azdispatch/internal/dequeue"
	"github.com/azdispatch/azdispatch/internal/gather"
	"github.com/azdispatch/azdispatch/internal/ratelimit"
	"github.com/azdispatch/azdispatch/internal/syncx"
)

const (
	// receiveTimeout bounds one receive call, retries included. A receive
	// is not cancelled by shutdown (the messages it returns would stay
	// hidden for the visibility timeout); this bounds how long Run waits for it.
	receiveTimeout = 30 * time.Second
	// wakeCoalesce is how long after a partial batch or an empty receive
	// a dequeuer ignores wake-ups. A publisher in the same process wakes
	// listeners on every send; without this, a steady stream of sends
	// would cost one receive each, twice the requests per message of
	// receiving them in batches, and a storm of wake-ups on an empty
	// queue one receive each.
	wakeCoalesce = 20 * time.Millisecond
	// rateHorizon is about how far ahead a rate-limited listener keeps
	// turns booked (an eighth of the visibility timeout if that is
	// shorter): long enough that a receive brings several messages at a
	// modest rate, short enough that a listener sharing the limiter gets
	// its first turn soon. No turn is booked further ahead than a quarter
	// of the visibility timeout, so that a message waiting for its turn is
	// never renewed (see [ratelimit.Gate]).
	rateHorizon = 500 * time.Millisecond
)

// dequeuer is one receive loop, counted in stats.active by Run. Each pass
// receives once, tries what came (see tryHere), and then does what
// dequeue.Next decides from the receive's result: receive again, scale up,
// back off, wait, or stop. It returns when Run's context ends, or when it
// retires (the Idle hook, or a target wait that needs fewer dequeuers).
type dequeuer[T any] struct {
	l   *Listener[T]
	s   *session
	ctx context.Context // Run's: when it ends, nothing more is received
	// slots is the seat this dequeuer holds (see Listener.seats).
	slots *syncx.Slots
	// sentTo is the due time this dequeuer was sent to look at (see
	// syncx.DueTimes.Limit), if any; given back if it stops first.
	sentTo         time.Time
	idle, failures int
	paused         bool // by a rate limiter that gives no turns
	retired        bool // taken out of stats.active already
	// arrivals holds the messages of the last receive; run tries them on
	// the dequeuer's goroutine (see tryHere). Both are reused from one
	// receive to the next, and left to the goroutine that tries when it
	// hands the loop on.
	arrivals []arrival
	run      *inlineRun
	backlog  bool // the last receive came back full (see takeSlots)
}

// receiveResult is one receive as the dequeuer saw it.
type receiveResult struct {
	asked, got int
	limited    bool
	noTurns    error // the rate limiter's refusal: nothing was received
	err        error
	// woken is the wake-up channel taken before the receive: a wake-up
	// while it is under way closes it, so the wait after ends at once.
	woken <-chan struct{}
	// started and answered bound the request: the service hid what it
	// brought at some moment between.
	started, answered time.Time
	look              *dueLook
}

// runDequeuer runs one dequeuer until it stops.
func (l *Listener[T]) runDequeuer(s *session) {
	dq := &dequeuer[T]{l: l, s: s, ctx: s.run}
	runRoles(func() role { return dq.carryOn(dq.takeSeat) })
}

// carryOn runs the dequeuer's loop once first has returned true (a seat
// taken, or, on a successor's goroutine, the step after the receive whose
// messages the previous goroutine still tries), then gives back what the
// dequeuer holds and returns nil; unless its goroutine hands the loop to a
// successor meanwhile, which does that in its stead: then it returns the
// goroutine's role from there on (a try goroutine's).
func (dq *dequeuer[T]) carryOn(first func() bool) role {
	if first() {
		if then := dq.loop(); then != nil {
			return then
		}
	}
	dq.leave()
	dq.s.dequeuers.Done()
	return nil
}

// loop receives, tries what came and does what dequeue.Next decides, until the
// dequeuer stops (nil) or its goroutine is left trying a message while a
// successor goes on receiving: it returns the goroutine's role from then on.
func (dq *dequeuer[T]) loop() role {
	for {
		r, batch, ok := dq.receive()
		if !ok {
			return nil
		}
		dq.record(r)
		next := dequeue.Next(dq.inputs(r))
		dq.backlog = next.Kind == dequeue.ScaleUp
		if len(batch) > 0 {
			if then := dq.tryHere(batch, next, r); then != nil {
				return then
			}
		}
		if !dq.follow(next, r) {
			return nil
		}
	}
}

// takeSeat takes a seat, which is free at once but when a dequeuer that
// has just stopped is still on its way out: it gives its seat back as it
// goes. It reports false if Run's context ended first.
func (dq *dequeuer[T]) takeSeat() bool {
	select {
	case dq.slots = <-dq.l.seats:
		return true
	case <-dq.ctx.Done():
		return false
	}
}

// leave gives back what the dequeuer holds as it stops.
func (dq *dequeuer[T]) leave() {
	l := dq.l
	l.due.Release(dq.sentTo)
	if dq.slots != nil {
		l.seats <- dq.slots
	}
	if !dq.retired {
		l.stats.active.Add(-1)
	}
}

// receive takes free slots, and turns under a rate limit, receives, and
// returns what came to be tried (or lets it reappear at once if Run is
// stopping). It reports false when the dequeuer should stop before
// receiving.
func (dq *dequeuer[T]) receive() (receiveResult, []arrival, bool) {
	l, ctx, slots := dq.l, dq.ctx, dq.slots
	var n int
	for {
		if !l.awaitUnpaused(ctx) {
			return receiveResult{}, nil, false
		}
		var err error
		if n, err = dq.takeSlots(); err != nil {
			return receiveResult{}, nil, false
		}
		if ctx.Err() != nil {
			// Slots were free, so Take did not wait; receiving now would
			// only cost a try of every message it brought back.
			slots.Give(n)
			return receiveResult{}, nil, false
		}
		if !l.pausedMeanwhile(ctx) {
			break
		}
		// Paused while this dequeuer waited for slots (handlers hanging
		// on the downstream the pause is for): not a receive more.
		slots.Give(n)
	}
	// Under a rate limit, no more messages than there are turns for
	// soon: the rest wait in the queue, visible to other workers. The
	// turns of those that come are booked after the receive.
	turns, err := l.takeTurns(ctx, n)
	if err != nil {
		slots.Give(n)
		return receiveResult{noTurns: err}, nil, ctx.Err() == nil
	}
	dq.paused = false
	r := receiveResult{asked: n, limited: turns != nil && turns.Len() < n}
	if r.limited {
		slots.Give(n - turns.Len())
		r.asked = turns.Len()
	}
	batch := dq.request(&r)
	// A receive may bring messages and an error (a middleware's own, or
	// a Source's): what it brought is received all the same.
	batch = l.keep(dq.s, batch, r.asked)
	r.got = len(batch)
	slots.Give(r.asked - r.got)
	turns.Use(r.got)
	l.stats.received.Add(int64(r.got))
	if ctx.Err() != nil {
		l.reappearNow(dq.s, slots, batch)
		return r, nil, true
	}
	var group *gather.Group
	if l.batch != nil && len(batch) > 0 {
		group = l.batch.gather.NewGroup(len(batch))
	}
	arrivals := dq.arrivals[:0]
	for i, d := range batch {
		arrivals = append(arrivals, arrival{d: d, slots: slots, received: r.started, took: r.answered.Sub(r.started), turn: turns.At(i), group: group})
	}
	dq.arrivals = arrivals
	return r, arrivals, true
}

// request makes the receive for r.asked messages, and notes when what it
// may have hidden reappears if its answer was lost.
func (dq *dequeuer[T]) request(r *receiveResult) []*Delivery {
	l := dq.l
	r.woken = l.wake.Current()
	// The service hides the messages from some moment during the request:
	// count their visibility from before it.
	r.started = time.Now()
	// A receive that may find messages known to be due again looks for
	// them everywhere, and every receive hears whether a shard failed
	// while another answered (see dueLook): one small allocation per
	// receive, not per message.
	r.look = &dueLook{}
	if next, ok := l.due.Next(); ok && !next.After(r.started) {
		r.look.all = true
	}
	batch, err := l.receive(dq.ctx, r.asked, r.look)
	r.answered, r.err = time.Now(), err
	if err != nil || r.look.anyFailed() {
		// A receive whose answer was lost, whole or one shard's, may have
		// hidden messages: they reappear when its visibility timeout ends.
		l.due.Add(reappearsBy(r.answered, l.opts.VisibilityTimeout))
	}
	return batch
}

// record counts the receive's success or failure.
func (dq *dequeuer[T]) record(r receiveResult) {
	l := dq.l
	switch {
	case r.noTurns != nil:
	case r.err != nil:
		dq.failures++
		l.stats.receiveErrors.Add(1)
		l.health.ReceiveFailures.Add(1)
		l.storageFailed(r.err)
	default:
		if dq.failures > 0 {
			dq.failures = 0
			l.health.ReceiveFailures.Store(0)
		}
		l.storageSucceeded(OpReceive)
	}
}

// inputs gathers what dequeue.Next decides on.
func (dq *dequeuer[T]) inputs(r receiveResult) dequeue.After {
	in := dequeue.After{
		Asked: r.asked, Got: r.got, Limited: r.limited, Held: r.look.wasHeld(), NoTurns: r.noTurns != nil,
		Failed: r.err != nil, Failures: dq.failures, Stopping: dq.ctx.Err() != nil, Idle: dq.idle,
	}
	if r.err != nil {
		in.RetryAfter = hintedWait(r.err, 0)
		in.Jitter = rand.Float64()
	}
	if r.noTurns == nil && r.err == nil && r.got < r.asked {
		in.Surplus = dq.l.surplus()
	}
	return in
}

// follow carries out next; it reports false when the dequeuer stops.
func (dq *dequeuer[T]) follow(next dequeue.Step, r receiveResult) bool {
	l, ctx := dq.l, dq.ctx
	dq.idle = next.Idle
	switch next.Kind {
	case dequeue.Stop:
		return false
	case dequeue.Receive:
		return true
	case dequeue.ScaleUp:
		if room, known := dq.cpuRoom(); known {
			l.scaleUp(ctx, dq.s, room)
		}
		return true
	case dequeue.BackOff:
		l.log.Warn("receive failed", "err", r.err, "failures", dq.failures, "kept", r.got, "retry_in", next.Delay)
		return syncx.Sleep(ctx, next.Delay, nil)
	case dequeue.Pause:
		if !dq.paused {
			l.log.Warn("the rate limiter gives no turns; receiving is paused until it does", "err", r.noTurns)
			dq.paused = true
		}
		return syncx.Sleep(ctx, next.Delay, nil)
	}
	dq.noteCovered(r)
	if next.Retire && dq.retire(r.woken) {
		// The queue is drained, and the handlers have been busy with fewer
		// than the dequeuers left would hold: the target needs no more
		// than those.
		return false
	}
	if next.Kind == dequeue.Wait {
		// Work sent meanwhile ends the wait, but not within the first
		// wakeCoalesce: a stream of sends, each waking the listener, is
		// then received in batches, not one receive per send.
		delay, _ := l.opts.Scaling.Idle(l.State(), 1)
		return l.sleepIdle(ctx, delay, r.woken, &dq.sentTo)
	}
	return dq.idleWait(next, r.woken)
}

// noteCovered, after a receive that brought fewer than it asked for, notes
// that everything visible when it started was there to take: every message
// due by then has been received, here or by another receiver; but for
// those on shards it could not ask, which are looked for again when it
// may.
func (dq *dequeuer[T]) noteCovered(r receiveResult) {
	l := dq.l
	l.due.Covered(r.started)
	if until, ok := r.look.unaskedUntil(); ok {
		// Not before a moment from now: a time already past would send a
		// dequeuer to ask the backed-off shard at once.
		if soonest := r.answered.Add(dueMargin); until.Before(soonest) {
			until = soonest
		}
		l.due.Add(until)
	}
}

// idleWait waits after an empty receive as the Idle hook says, or retires
// the dequeuer if the hook says stop and it may. It reports false when the
// dequeuer stops.
func (dq *dequeuer[T]) idleWait(next dequeue.Step, woken <-chan struct{}) bool {
	l, ctx := dq.l, dq.ctx
	l.stats.emptyReceives.Add(1)
	if next.Drained || l.stats.wanted.Load() != 0 {
		// Whatever the last depth reading called for is met, and a target
		// out of reach then is within it now: seen at the first empty
		// receive of a streak, or at a later one if a reading came after
		// it (another dequeuer's, made once it had tried its last
		// messages, while messages were still in hand and counted in the
		// depth).
		l.scale.Drained()
		l.stats.wanted.Store(0)
	}
	delay, stop := l.opts.Scaling.Idle(l.State(), dq.idle)
	if stop && dq.retire(woken) {
		return false
	}
	l.event(Event{Kind: EventIdle, Dequeuers: int(l.stats.active.Load()), IdleCount: dq.idle, Delay: delay})
	l.stats.idle.Add(1)
	live := l.sleepIdle(ctx, delay, woken, &dq.sentTo)
	l.stats.idle.Add(-1)
	if live && syncx.IsClosed(woken) {
		dq.idle = 0 // told there is work: start the curve again
	}
	return live
}

// retire takes this dequeuer out of the count if the listener allows it.
func (dq *dequeuer[T]) retire(woken <-chan struct{}) bool {
	dq.retired = dq.l.retire(woken)
	return dq.retired
}

// takeTurns says how many of up to n messages may be received under the
// rate limit (nil Turns without one), waiting while there are no turns
// soon; the caller books the turns of those received with Turns.Use. It
// fails when ctx ends, or with ratelimit.ErrNoTurns when the limiter gives
// no turns at all.
func (l *Listener[T]) takeTurns(ctx context.Context, n int) (*ratelimit.Turns, error) {
	if l.gate == nil {
		return nil, nil
	}
	return l.gate.Take(ctx, n)
}

// sleepIdle waits delay before the next receive, or less: until a wake-up
// closes woken, but not within the first wakeCoalesce (a storm of wake-ups,
// from an open wake endpoint or a sender that notifies in a loop, then
// costs at most one receive per wakeCoalesce, not one each); or until a
// message the listener let go of is due, if this dequeuer is the one sent
// to look for it (see [syncx.DueTimes.Limit]; sentTo holds that time across
// calls). A new earliest due time wakes one sleeping dequeuer, which sees
// whether it should go. It reports whether ctx is still live.
func (l *Listener[T]) sleepIdle(ctx context.Context, delay time.Duration, woken <-chan struct{}, sentTo *time.Time) bool {
	start := time.Now()
	end, wakeFrom := start.Add(delay), start.Add(wakeCoalesce)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		wait, to := l.due.Limit(now, max(end.Sub(now), 0), *sentTo)
		*sentTo = to
		if wait <= 0 {
			return ctx.Err() == nil
		}
		var wake <-chan struct{}
		if now.Before(wakeFrom) {
			wait = min(wait, wakeFrom.Sub(now)) // then listen for wake-ups
		} else {
			wake = woken
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return false
		case <-wake:
			return true
		case <-l.due.Changed():
		case <-timer.C:
			if now := time.Now(); !now.Before(end) || !to.IsZero() && !now.Before(to) {
				return true
			}
		}
	}
}

// keep returns the deliveries of a receive that asked for n, as the
// listener takes them: a [Source] that returns nil entries, or more than it
// was asked for, breaks its contract, but loses no message for it. Nil
// entries are dropped; deliveries past n are made visible again at once
// (counted as received and released), since no slot was taken for them.
func (l *Listener[T]) keep(s *session, batch []*Delivery, n int) []*Delivery {
	kept := batch
	if slices.Contains(batch, nil) {
		kept = slices.DeleteFunc(slices.Clone(batch), func(d *Delivery) bool { return d == nil })
	}
	if len(kept) <= n {
		return kept
	}
	extra := kept[n:]
	l.log.Error("the source returned more messages than it was asked for; the extra ones are made visible again", "asked", n, "got", len(kept))
	l.stats.received.Add(int64(len(extra)))
	l.reappearNow(s, nil, extra)
	return kept[:n]
}

// receive asks the source for up to n messages, with look for a sharded
// queue to read and fill. The call is not cut short by ctx: messages the
// service hands out are always taken, and released if the listener is
// stopping.
func (l *Listener[T]) receive(ctx context.Context, n int, look *dueLook) ([]*Delivery, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), receiveTimeout)
	defer cancel()
	// A refused connection is reported now, and retried after the
	// listener's back-off, not the SDK's.
	rctx = failFastRefused(rctx)
	rctx = withDueLook(rctx, look)
	return l.srcReceive(rctx, n)
}

// cpuRoom reports whether another dequeuer could go faster after a full
// receive: not while the process filled its cores (GOMAXPROCS) over the
// last span measured, as another loop would only share them. Within a span
// not yet measured (the first of Run, or after a scale-up) it is unknown,
// and the step waits, the depth read too, so that the read can be acted
// on. Handlers that wait on something else scale it from takeSlots.
func (dq *dequeuer[T]) cpuRoom() (room, known bool) {
	full, known := dq.s.cores.Full()
	return !full, known
}

// heldBackFor is how long a dequeuer waits for free slots before its
// handlers count as waiting on something (storage, a database, a lock),
// not on a core: tries that wait for a core run as soon as it parks.
const heldBackFor = 10 * time.Millisecond

// takeSlots takes the slots of the next receive, waiting for them if too
// few are free. A dequeuer that waits heldBackFor after a full receive is
// held back by its handlers, however busy the process is: it asks for
// another dequeuer then, as after a full receive (see scaleUp), since more
// handlers waiting at once is what makes such work go faster.
func (dq *dequeuer[T]) takeSlots() (int, error) {
	l := dq.l
	if n, ok := dq.slots.TryTake(l.threshold, l.opts.Scaling.BatchSize); ok {
		return n, nil
	}
	wait, cancel := context.WithTimeout(dq.ctx, heldBackFor)
	n, err := dq.slots.Take(wait, l.threshold, l.opts.Scaling.BatchSize)
	cancel()
	if err == nil || dq.ctx.Err() != nil {
		return n, err
	}
	if dq.backlog {
		l.scaleUp(dq.ctx, dq.s, true)
	}
	return dq.slots.Take(dq.ctx, l.threshold, l.opts.Scaling.BatchSize)
}

// scaleUp, after a full receive, reads the queue's depth, at most once per
// ScaleInterval across the listener, and asks Run for the dequeuers the
// Scale hook wants, if room says more could go faster (see cpuRoom): the
// depth is read all the same, for State. Between two readings the full
// receives themselves say the queue holds more: a round of them adds a
// dequeuer (see dequeue.Scaler.Full).
func (l *Listener[T]) scaleUp(ctx context.Context, s *session, room bool) {
	now := time.Now()
	if !l.scale.ClaimDepthRead(now) {
		if !room {
			return
		}
		active := int(l.stats.active.Load())
		if l.scale.Full(now, active) {
			s.cores.Restart()
			l.stats.scaleUps.Add(1)
			l.ask(active + 1)
			l.log.Debug("scaling up on full receives", "dequeuers", active+1)
			l.event(Event{Kind: EventScaleUp, Dequeuers: active + 1, Depth: -1})
		}
		return
	}
	defer l.scale.ReadDone()
	depth, err := l.readDepth(ctx)
	if err != nil {
		if ctx.Err() == nil {
			l.storageFailed(err)
			l.log.Warn("reading the depth to scale failed", "err", err)
		}
		return
	}
	l.storageSucceeded(OpDepth)
	l.stats.setDepth(depth, now)
	active := int(l.stats.active.Load())
	want := l.opts.Scaling.Scale(l.State(), depth)
	l.stats.wanted.Store(int64(want))
	if l.opts.Scaling.TargetWait > 0 && l.scale.Unmet(want) {
		l.log.Warn("the latency target calls for more dequeuers than Scaling.MaxDequeuers", "target", l.opts.Scaling.TargetWait,
			"dequeuers", want, "max", l.opts.Scaling.MaxDequeuers, "depth", depth)
		l.event(Event{Kind: EventTargetUnmet, Dequeuers: want, Depth: depth})
	}
	if !room {
		if want > active {
			l.log.Debug("not scaling up: the process fills its cores with work its dequeuers finish as they receive it",
				"dequeuers", active, "wanted", want, "depth", depth)
		}
		return
	}
	add := l.scale.Target(now, want, active)
	if add == 0 {
		return
	}
	s.cores.Restart()
	l.stats.scaleUps.Add(1)
	l.ask(active + add)
	l.log.Debug("scaling up", "depth", depth, "dequeuers", active+add)
	l.event(Event{Kind: EventScaleUp, Dequeuers: active + add, Depth: depth})
}

// surplus reports whether, scaling to a target wait, more dequeuers run
// than the work needs: asked after a receive that drained the queue, so
// that no backlog remains and the handlers' recent load, with a quarter
// more for headroom, is what the dequeuers must hold (Little's law: the
// calls under way at once are the arrival rate times the handler time).
// Without a target, dequeuers stop only as the Idle hook says.
func (l *Listener[T]) surplus() bool {
	if l.opts.Scaling.TargetWait <= 0 {
		return false
	}
	busy := l.stats.handlerTime.Busy(time.Now()) * 1.25
	need := max(int(math.Ceil(busy/float64(l.opts.Concurrency))), 1)
	return int(l.stats.active.Load()) > need
}

// retire takes an idle dequeuer out of the count if the floor and the
// scale-up hold allow it. woken is the wake-up channel taken before its last
// receive: a wake-up since then, which may have seen the dequeuer as running
// and started none, asks for one again.
func (l *Listener[T]) retire(woken <-chan struct{}) bool {
	if !l.scale.MayRetire(time.Now()) {
		return false
	}
	for {
		n := l.stats.active.Load()
		if int(n) <= l.floor {
			return false
		}
		if l.stats.active.CompareAndSwap(n, n-1) {
			break
		}
	}
	l.stats.scaleDowns.Add(1)
	left := int(l.stats.active.Load())
	switch {
	case left == 0 && syncx.IsClosed(woken):
		l.ask(1)
	case left == 0:
		// Run watches the due times itself while no dequeuer runs.
		l.ask(0)
	}
	l.log.Debug("idle dequeuer stopping", "dequeuers", left)
	l.event(Event{Kind: EventScaleDown, Dequeuers: left})
	return true
}
