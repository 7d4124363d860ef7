package azdispatch

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/backoff"
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

// dequeue is one receive loop, counted in stats.active by Run. It returns when
// Run's context ends, or when the Idle hook lets it stop.
func (l *Listener[T]) dequeue(s *session) {
	ctx := s.run
	retired := false
	defer func() {
		if !retired {
			l.stats.active.Add(-1)
		}
	}()
	// A seat is free at once but when a dequeuer that has just stopped is
	// still on its way out: it gives its seat back as it goes.
	var slots *syncx.Slots
	select {
	case slots = <-l.seats:
	case <-ctx.Done():
		return
	}
	defer func() { l.seats <- slots }()
	// sentTo is the due time this dequeuer was sent to look at (see
	// syncx.DueTimes.Limit), if any; given back if it stops first.
	var sentTo time.Time
	defer func() { l.due.Release(sentTo) }()
	idle, failures := 0, 0
	paused := false // by a rate limiter that gives no turns
	for {
		n, err := slots.Take(ctx, l.threshold, l.opts.BatchSize)
		if err != nil {
			return
		}
		if ctx.Err() != nil {
			// Slots were free, so Take did not wait; receiving now would
			// only cost a try of every message it brought back.
			slots.Give(n)
			return
		}
		// Under a rate limit, no more messages than there are turns for
		// soon: the rest wait in the queue, visible to other workers.
		// The turns of those that come are booked after the receive.
		turns, err := l.takeTurns(ctx, n)
		if err != nil {
			slots.Give(n)
			if ctx.Err() != nil {
				return
			}
			// The limiter gives no turns (a rate of 0 with its burst spent,
			// or a burst set to 0 after the listener was made): nothing may
			// start until it is changed, which is looked for every second.
			if !paused {
				l.log.Warn("the rate limiter gives no turns; receiving is paused until it does", "err", err)
				paused = true
			}
			if !syncx.Sleep(ctx, time.Second, nil) {
				return
			}
			continue
		}
		paused = false
		limited := turns != nil && turns.Len() < n
		if limited {
			slots.Give(n - turns.Len())
			n = turns.Len()
		}
		// Taken before the receive: a wake-up that comes while the
		// receive is under way closes it, so the back-off below ends at once.
		woken := l.wake.Current()
		// The service hides the messages from some moment during the
		// request: count their visibility from before it.
		asked := time.Now()
		// A receive that may find messages known to be due again looks
		// for them everywhere, and every receive hears whether a shard
		// failed while another answered (see dueLook): one small
		// allocation per receive, not per message.
		look := &dueLook{}
		if next, ok := l.due.Next(); ok && !next.After(asked) {
			look.all = true
		}
		batch, err := l.receive(ctx, n, look)
		answered := time.Now()
		if err != nil || look.anyFailed() {
			// A receive whose answer was lost, whole or one shard's, may
			// have hidden messages: they are due again when its
			// visibility timeout ends.
			l.due.Add(dueBy(answered, l.opts.VisibilityTimeout))
		}
		// A receive may bring messages and an error (a middleware's own,
		// or a Source's): what it brought is received all the same.
		batch = l.keep(s, batch, n)
		slots.Give(n - len(batch))
		turns.Use(len(batch))
		l.stats.received.Add(int64(len(batch)))
		switch {
		case ctx.Err() != nil:
			l.releaseNow(s, slots, batch)
		default:
			for i, d := range batch {
				l.hand(s, work{d: d, slots: slots, received: asked, took: answered.Sub(asked), turn: turns.At(i)})
			}
		}
		if err != nil {
			failures++
			l.stats.receiveErrors.Add(1)
			l.health.receiveFailures.Add(1)
			l.storageFailed(err)
			// The service's Retry-After, if longer, wins: it knows how
			// long it will be busy.
			wait := hintedWait(err, backoff.Retry(250*time.Millisecond, 30*time.Second, int64(failures), rand.Float64()))
			l.log.Warn("receive failed", "err", err, "failures", failures, "kept", len(batch), "retry_in", wait)
			if !syncx.Sleep(ctx, wait, nil) {
				return
			}
			continue
		}
		if failures > 0 {
			failures = 0
			l.health.receiveFailures.Store(0)
		}
		l.storageSucceeded(OpReceive)
		if ctx.Err() != nil {
			return
		}
		if len(batch) == n && limited {
			// As many as the rate limit has turns for: more dequeuers
			// would only wait at the gate. Ask again (the gate waits for
			// the next turns).
			idle = 0
			continue
		}
		if len(batch) == n {
			// A full batch, whether the first after a quiet spell or one
			// of many: the queue may hold more than this dequeuer can
			// take. (A partial batch took all there was: reading the
			// depth then would be a request spent to learn nothing.)
			l.scaleUp(ctx)
			idle = 0
			continue // there may be more: receive again at once
		}
		// Fewer than asked for: everything visible when the receive
		// started was there to take, so every message due by then has
		// been received, here or by another receiver; but for those on
		// shards it could not ask, which are looked for again when it may.
		l.due.Covered(asked)
		if until, ok := look.unaskedUntil(); ok {
			// Not before a moment from now: a time already past would
			// send a dequeuer to ask the backed-off shard at once.
			if soonest := answered.Add(dueMargin); until.Before(soonest) {
				until = soonest
			}
			l.due.Add(until)
		}
		if l.surplus() && l.retire(woken) {
			// The queue is drained, and the handlers have been busy
			// with fewer than the dequeuers left would hold: the
			// target needs no more than those.
			retired = true
			return
		}
		if len(batch) > 0 {
			// The queue had no more just now, so an immediate receive
			// would most likely come back empty. Wait as after a first
			// empty receive, without counting it as idle. Work sent
			// meanwhile ends the wait, but not within the first
			// wakeCoalesce: a stream of sends, each waking the listener, is
			// then received in batches, not one receive per send.
			idle = 0
			delay, _ := l.opts.Idle(l.State(), 1)
			if !l.sleepIdle(ctx, delay, woken, &sentTo) {
				return
			}
			continue
		}
		idle++
		l.stats.emptyReceives.Add(1)
		if idle == 1 {
			// Drained: whatever the last depth reading called for is
			// met, and a target out of reach then is within it now.
			l.scale.drained()
			l.stats.wanted.Store(0)
		}
		delay, stop := l.opts.Idle(l.State(), idle)
		if stop && l.retire(woken) {
			retired = true
			return
		}
		l.event(Event{Kind: EventIdle, Dequeuers: int(l.stats.active.Load()), IdleCount: idle, Delay: delay})
		l.stats.idle.Add(1)
		live := l.sleepIdle(ctx, delay, woken, &sentTo)
		l.stats.idle.Add(-1)
		if !live {
			return
		}
		if syncx.IsClosed(woken) {
			idle = 0 // told there is work: start the curve again
		}
	}
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
	l.releaseNow(s, nil, extra)
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

// releaseNow makes received messages that will not be handled (received
// during shutdown, or beyond what was asked for) visible again at once, in
// parallel, so that another receiver gets them without waiting out the
// visibility timeout. Each gives back its slot, if slots is not nil.
func (l *Listener[T]) releaseNow(s *session, slots *syncx.Slots, batch []*Delivery) {
	visibleBy := dueBy(time.Now(), l.opts.VisibilityTimeout) // if a release fails
	for _, d := range batch {
		s.handlers.Go(func() {
			if slots != nil {
				defer slots.Give(1)
			}
			l.count(l.release(s.settle.Get(), d, 0, visibleBy), &l.stats.released)
		})
	}
}

// scaleUp, after a full receive, reads the queue's depth, at most once per
// ScaleInterval across the listener, and asks Run for the dequeuers the
// Scale hook wants. Between two readings the full receives themselves say
// the queue holds more: a round of them adds a dequeuer (see scaler.full).
func (l *Listener[T]) scaleUp(ctx context.Context) {
	now := time.Now()
	if !l.scale.claimDepthRead(now) {
		active := int(l.stats.active.Load())
		if l.scale.full(now, active) {
			l.stats.scaleUps.Add(1)
			l.ask(active + 1)
			l.log.Debug("scaling up on full receives", "dequeuers", active+1)
			l.event(Event{Kind: EventScaleUp, Dequeuers: active + 1, Depth: -1})
		}
		return
	}
	defer l.scale.readDone()
	depth, err := l.src.Depth(ctx)
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
	want := l.opts.Scale(l.State(), depth)
	l.stats.wanted.Store(int64(want))
	if l.opts.TargetWait > 0 && l.scale.unmet(want) {
		l.log.Warn("the latency target calls for more dequeuers than MaxDequeuers", "target", l.opts.TargetWait,
			"dequeuers", want, "max", l.opts.MaxDequeuers, "depth", depth)
		l.event(Event{Kind: EventTargetUnmet, Dequeuers: want, Depth: depth})
	}
	add := l.scale.target(now, want, active)
	if add == 0 {
		return
	}
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
	if l.opts.TargetWait <= 0 {
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
	if !l.scale.mayRetire(time.Now()) {
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

// workerIdle is about how long a handler goroutine with nothing to do waits
// for the next message before it stops (between one and two of these).
const workerIdle = 5 * time.Second

// work is one received message for a handler goroutine, with the slot it
// gives back to its dequeuer once it is settled. A work with no message
// tells the goroutine that takes it to stop.
type work struct {
	d     *Delivery
	slots *syncx.Slots
	// received is when the receive that brought d was asked for, and took
	// how long it took to return: the service hid d at some moment between.
	received time.Time
	took     time.Duration
	// turn is when d may start under the rate limit; zero without one.
	turn time.Time
}

// workers are the session's handler goroutines. They are reused because a
// new goroutine per message grows its stack afresh each time the message's
// call chain gets deep (runtime.copystack), which cost more CPU than all
// the rest of the listener's work on a message. A goroutine waits for its
// next message on one channel receive, with no timer of its own: the watch
// retires those that stay idle (see retireIdle).
type workers struct {
	ch   chan work
	idle atomic.Int64 // goroutines waiting on ch now

	mu         sync.Mutex // orders retireIdle's sends before close
	closed     bool
	idleBefore int64 // how many waited at the previous look
}

// hand gives w to an idle handler goroutine, or starts one.
func (l *Listener[T]) hand(s *session, w work) {
	select {
	case s.workers.ch <- w:
	default:
		s.handlers.Go(func() { l.worker(s, w) })
	}
}

// worker handles w, then whatever else is handed to it, until it is told to
// stop or the channel is closed at the end of the session.
func (l *Listener[T]) worker(s *session, w work) {
	for {
		l.process(s, w) // gives back w's slot, whatever becomes of its goroutine
		s.workers.idle.Add(1)
		w = <-s.workers.ch
		s.workers.idle.Add(-1)
		if w.d == nil {
			return
		}
	}
}

// retireIdle stops as many handler goroutines as were idle both now and at
// the previous look, workerIdle ago: a listener that has been quiet keeps
// none, and a busy one keeps those it keeps using. It is called every
// workerIdle by the watch.
func (w *workers) retireIdle() {
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
		case w.ch <- work{}:
		default: // it took work meanwhile; it may go next time
			return
		}
	}
}

// close tells every waiting handler goroutine to stop, and those still
// working to stop once they are done. Only once no dequeuer is left, since
// a dequeuer hands work on the channel.
func (w *workers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	close(w.ch)
}
