package azdispatch

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// receiveTimeout bounds one receive call, retries included. A receive
	// is not cancelled by shutdown (the messages it returns would stay
	// hidden for the visibility timeout); this bounds how long Run waits for it.
	receiveTimeout = 30 * time.Second
	// wakeCoalesce is how long after a partial batch a dequeuer ignores
	// wake-ups. A publisher in the same process wakes listeners on every
	// send; without this, a steady stream of sends would cost one receive
	// each, twice the requests per message of receiving them in batches.
	wakeCoalesce = 20 * time.Millisecond
	// settleTimeout bounds a delete, release or poison move, which outlive
	// the listener's context so that a shutdown settles what it finished.
	settleTimeout = 30 * time.Second
)

// Listener receives messages from a Source, decodes them into T and runs a
// handler for each, at least once. Create one with NewListener and start it
// with Run.
//
// Its receive loops (dequeuers) scale with the work: from MinDequeuers when
// the queue is empty, up to MaxDequeuers as the queue's depth calls for, and
// back down as they go idle. Each dequeuer hands its messages to up to
// Concurrency handler goroutines.
type Listener[T any] struct {
	src     Source
	handler Handler[T]
	cfg     ListenerConfig
	log     *slog.Logger

	floor     int // dequeuers kept when idle: MinDequeuers, or 0 when PushOnly
	threshold int // free slots a dequeuer needs before receiving again
	scale     scaler
	wake      *signal
	want      atomic.Int64  // dequeuers asked for, read by Run
	asked     chan struct{} // tells Run that want changed
	due       dueTimes
	handlers  chan struct{} // a token per handler call running: single messages and batch items
	stats     stats
	tx        Counter
	running   atomic.Bool
}

// NewListener returns a listener that runs h for every message from src.
// A nil cfg means defaults; an invalid field is reported as a *ConfigError
// naming it.
func NewListener[T any](src Source, h Handler[T], cfg *ListenerConfig) (*Listener[T], error) {
	if src == nil {
		return nil, &ConfigError{Field: "src", Reason: "nil source"}
	}
	if h == nil {
		return nil, &ConfigError{Field: "h", Reason: "nil handler"}
	}
	c, err := cfg.withDefaults(src)
	if err != nil {
		return nil, err
	}
	if err := checkCodecType[T](c.Codec); err != nil {
		return nil, &ConfigError{Field: "ListenerConfig.Codec", Reason: err.Error()}
	}
	floor := c.MinDequeuers
	if c.PushOnly {
		floor = 0
	}
	return &Listener[T]{
		src: src, handler: h, cfg: c, log: c.Logger.With("source", src.Name()),
		floor:     floor,
		threshold: min(c.BatchSize, max(1, c.Concurrency/2)),
		scale:     scaler{interval: c.ScaleInterval, min: floor, max: c.MaxDequeuers},
		wake:      newSignal(),
		asked:     make(chan struct{}, 1),
		// Dequeuers' slots bound the messages in hand; these tokens bound
		// the handler calls, so that the items of batches, which run
		// while their message holds one slot, do not take the listener
		// past MaxDequeuers × Concurrency handlers at once.
		handlers: make(chan struct{}, c.MaxDequeuers*c.Concurrency),
	}, nil
}

// State returns the listener's counters now.
func (l *Listener[T]) State() State {
	s := l.stats.snapshot()
	s.MinDequeuers = l.floor
	s.Transactions = l.tx.Snapshot()
	return s
}

// Notify tells the listener that work was sent: dequeuers backing off on an
// empty queue receive at once, and if none is running (PushOnly) one starts.
// It makes no request itself and never blocks. Sends through the listener's
// own *Queue in this process, and wake-ups from ListenerConfig.Wake, call it.
func (l *Listener[T]) Notify() {
	l.stats.wakes.Add(1)
	// Only a wake-up that ends a back-off or starts a dequeuer is an event:
	// a stream of sends to a busy listener would otherwise be one per send.
	active, idle := l.stats.active.Load(), l.stats.idle.Load()
	l.wake.broadcast()
	if active == 0 {
		l.ask(1)
	}
	if active == 0 || idle > 0 {
		l.event(Event{Kind: Woken, Dequeuers: int(active)})
	}
}

// Run receives and handles messages until ctx ends, then shuts down: it stops
// receiving, makes visible again at once what was received but not started
// (a batch starts no further item and is released once its running items
// end, with a checkpoint of what they did), lets running handlers finish for
// up to DrainTimeout, then cancels their contexts and waits for them. It
// returns only when every goroutine it started has stopped: nil after a
// shutdown, ErrAlreadyRunning if the listener is running already. Storage
// errors do not end Run; they are logged, counted in State and retried
// after a back-off.
func (l *Listener[T]) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer l.running.Store(false)

	ctx = CountTransactions(ctx, &l.tx)
	// Handlers and settling run on a context that outlives ctx, so that a
	// shutdown lets them finish; the drain cancels it.
	work, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)

	if ws, ok := l.src.(WakeSource); ok {
		defer ws.Subscribe(l.Notify)()
	}
	if l.cfg.Wake != nil && !sameValue(l.cfg.Wake, l.src) {
		defer l.cfg.Wake.Subscribe(l.Notify)()
	}

	// Only this goroutine starts dequeuers, so that none starts once the
	// shutdown has begun to wait for them.
	var dequeuers, handlers sync.WaitGroup
	l.ask(max(l.floor, 1))
	for {
		select {
		case <-ctx.Done():
			l.shutdown(&dequeuers, &handlers, stopWork)
			return nil
		case <-l.asked:
			want := min(int(l.want.Swap(0)), l.cfg.MaxDequeuers)
			for int(l.stats.active.Load()) < want {
				l.stats.started()
				dequeuers.Go(func() { l.dequeue(ctx, work, &handlers) })
			}
		}
	}
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

// dequeue is one receive loop, counted in stats.active by Run. It returns when
// ctx ends, or when the Idle hook lets it stop.
func (l *Listener[T]) dequeue(ctx, work context.Context, handlers *sync.WaitGroup) {
	retired := false
	defer func() {
		if !retired {
			l.stats.active.Add(-1)
		}
	}()
	slots := newSlots(l.cfg.Concurrency)
	idle, failures := 0, 0
	for {
		n, err := slots.take(ctx, l.threshold, l.cfg.BatchSize)
		if err != nil {
			return
		}
		if ctx.Err() != nil {
			// Slots were free, so take did not wait; receiving now would
			// only cost a try of every message it brought back.
			slots.give(n)
			return
		}
		// Taken before the receive: a wake-up that comes while the
		// receive is under way closes it, so the back-off below ends at once.
		woken := l.wake.current()
		batch, err := l.receive(ctx, n)
		slots.give(n - len(batch))
		if err != nil {
			failures++
			l.stats.receiveErrors.Add(1)
			l.log.Warn("receive failed", "err", err, "failures", failures)
			if !sleep(ctx, retryDelay(250*time.Millisecond, 30*time.Second, int64(failures), rand.Float64()), nil) {
				return
			}
			continue
		}
		failures = 0
		l.stats.received.Add(int64(len(batch)))
		if ctx.Err() != nil {
			l.releaseUnstarted(work, slots, batch)
			return
		}
		for _, d := range batch {
			handlers.Go(func() {
				defer slots.give(1)
				l.process(ctx, work, d)
			})
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
		if len(batch) > 0 {
			// Fewer than asked for: the queue had no more just now, so an
			// immediate receive would most likely come back empty. Wait
			// as after a first empty receive, without counting it as idle.
			// Work sent meanwhile ends the wait, but not within the first
			// wakeCoalesce: a stream of sends, each waking the listener, is
			// then received in batches, not one receive per send.
			idle = 0
			delay, _ := l.cfg.Idle(l.State(), 1)
			delay = l.due.limit(time.Now(), delay)
			if !sleep(ctx, min(delay, wakeCoalesce), nil) || !sleep(ctx, delay-wakeCoalesce, woken) {
				return
			}
			continue
		}
		idle++
		l.stats.emptyReceives.Add(1)
		delay, stop := l.cfg.Idle(l.State(), idle)
		if stop && l.retire(woken) {
			retired = true
			return
		}
		l.event(Event{Kind: Idle, Dequeuers: int(l.stats.active.Load()), IdleCount: idle, Delay: delay})
		l.stats.idle.Add(1)
		live := sleep(ctx, l.due.limit(time.Now(), delay), woken)
		l.stats.idle.Add(-1)
		if !live {
			return
		}
		if isClosed(woken) {
			idle = 0 // told there is work: start the curve again
		}
	}
}

// scaleUp reads the queue's depth, at most once per ScaleInterval across the
// listener, and asks Run for the dequeuers the Scale hook wants.
func (l *Listener[T]) scaleUp(ctx context.Context) {
	now := time.Now()
	if !l.scale.claimDepthRead(now) {
		return
	}
	defer l.scale.readDone()
	depth, err := l.src.Depth(ctx)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("reading the depth to scale failed", "err", err)
		}
		return
	}
	l.stats.setDepth(depth, now)
	active := int(l.stats.active.Load())
	add := l.scale.target(now, l.cfg.Scale(l.State(), depth), active)
	if add == 0 {
		return
	}
	l.stats.scaleUps.Add(1)
	l.ask(active + add)
	l.log.Debug("scaling up", "depth", depth, "dequeuers", active+add)
	l.event(Event{Kind: ScaleUp, Dequeuers: active + add, Depth: depth})
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
	if left == 0 && isClosed(woken) {
		l.ask(1)
	}
	l.log.Debug("idle dequeuer stopping", "dequeuers", left)
	l.event(Event{Kind: ScaleDown, Dequeuers: left})
	return true
}

// sameValue reports whether a and b hold the same comparable value, without
// panicking on values that are not comparable.
func sameValue(a, b any) (same bool) {
	defer func() { _ = recover() }()
	return a == b
}

// event passes e to the OnEvent hook, if any.
func (l *Listener[T]) event(e Event) {
	if l.cfg.OnEvent != nil {
		l.cfg.OnEvent(e)
	}
}

// receive asks the source for up to n messages. The call is not cut short by
// ctx: messages the service hands out are always taken, and released if the
// listener is stopping.
func (l *Listener[T]) receive(ctx context.Context, n int) ([]*Delivery, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), receiveTimeout)
	defer cancel()
	return l.src.Receive(rctx, n, l.cfg.VisibilityTimeout)
}

// sleep waits for d, until wake is closed (nil never is) or until ctx ends;
// it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		return ctx.Err() == nil
	case <-t.C:
		return true
	}
}

// isClosed reports whether a wake-up channel has been closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
