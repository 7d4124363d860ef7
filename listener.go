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
	// settleTimeout bounds a delete, release or poison move, which outlive
	// the listener's context so that a shutdown settles what it finished.
	settleTimeout = 30 * time.Second
)

// Listener receives messages from a Source, decodes them into T and runs a
// handler for each, at least once. Create one with NewListener and start it
// with Run.
type Listener[T any] struct {
	src     Source
	handler Handler[T]
	cfg     ListenerConfig
	log     *slog.Logger

	slots     *slots
	threshold int // free slots needed before receiving again
	due       dueTimes
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
	return &Listener[T]{
		src: src, handler: h, cfg: c, log: c.Logger.With("source", src.Name()),
		slots:     newSlots(c.Concurrency),
		threshold: min(c.BatchSize, max(1, c.Concurrency/2)),
	}, nil
}

// State returns the listener's counters now.
func (l *Listener[T]) State() State {
	s := l.stats.snapshot()
	s.Transactions = l.tx.Snapshot()
	return s
}

// Run receives and handles messages until ctx ends, then shuts down: it stops
// receiving, makes visible again at once what was received but not started,
// lets running handlers finish for up to DrainTimeout, then cancels their
// contexts and waits for them. It returns only when every goroutine it
// started has stopped: nil after a shutdown, ErrAlreadyRunning if the
// listener is running already. Storage errors do not end Run; they are
// logged, counted in State and retried after a back-off.
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

	var dequeuers, handlers sync.WaitGroup
	for range l.cfg.Dequeuers {
		dequeuers.Go(func() { l.dequeue(ctx, work, &handlers) })
	}
	<-ctx.Done()
	l.shutdown(&dequeuers, &handlers, stopWork)
	return nil
}

// dequeue is one receive loop. It returns when ctx ends.
func (l *Listener[T]) dequeue(ctx, work context.Context, handlers *sync.WaitGroup) {
	l.stats.active.Add(1)
	defer l.stats.active.Add(-1)
	idle, failures := 0, 0
	for {
		n, err := l.slots.take(ctx, l.threshold, l.cfg.BatchSize)
		if err != nil {
			return
		}
		if ctx.Err() != nil {
			// Slots were free, so take did not wait; receiving now would
			// only cost a try of every message it brought back.
			l.slots.give(n)
			return
		}
		batch, err := l.receive(ctx, n)
		l.slots.give(n - len(batch))
		if err != nil {
			failures++
			l.stats.receiveErrors.Add(1)
			l.log.Warn("receive failed", "err", err, "failures", failures)
			if !sleep(ctx, retryDelay(250*time.Millisecond, 30*time.Second, int64(failures), rand.Float64())) {
				return
			}
			continue
		}
		failures = 0
		l.stats.received.Add(int64(len(batch)))
		if ctx.Err() != nil {
			l.releaseUnstarted(work, batch)
			return
		}
		for _, d := range batch {
			handlers.Go(func() {
				defer l.slots.give(1)
				l.process(work, d)
			})
		}
		if len(batch) == n {
			idle = 0
			continue // there may be more: receive again at once
		}
		// Fewer than asked for: the queue had no more just now, so an
		// immediate receive would most likely come back empty. After a
		// partial batch, wait as after a first empty receive, without
		// counting it as idle.
		step := 1
		if len(batch) == 0 {
			idle++
			step = idle
		} else {
			idle = 0
		}
		delay, _ := l.cfg.Idle(l.State(), step)
		if !sleep(ctx, l.due.limit(time.Now(), delay)) {
			return
		}
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

// sleep waits for d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
