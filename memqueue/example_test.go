package memqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

type order struct{ ID string }

// handleOrder is the handler under test: it fails the first try of a flaky
// order, always fails a bad one, and hangs on the first try of a slow one.
func handleOrder(ctx context.Context, m *azdispatch.Message[order]) error {
	switch {
	case strings.HasPrefix(m.Body.ID, "flaky") && m.DequeueCount == 1:
		return errors.New("downstream unavailable")
	case strings.HasPrefix(m.Body.ID, "bad"):
		return errors.New("no such customer")
	case strings.HasPrefix(m.Body.ID, "slow") && m.DequeueCount == 1:
		<-ctx.Done() // hangs until HandlerTimeout
		return ctx.Err()
	}
	return nil
}

// A handler tested with no emulator and no account, in milliseconds: a
// retry after a failure, a message poisoned after MaxDequeueCount failures,
// and a handler timeout, all through a real Listener.
func Example() {
	ctx := context.Background()
	q := memqueue.New("orders", nil)
	for _, id := range []string{"ok-1", "flaky-2", "bad-3", "slow-4"} {
		if _, err := q.Send(ctx, fmt.Sprintf(`{"ID":%q}`, id), nil); err != nil {
			panic(err)
		}
	}
	idle := make(chan struct{}, 1)
	l, err := azdispatch.NewListener(q, handleOrder, &azdispatch.ListenerOptions{
		MaxDequeueCount: 3,
		Retry:           func(int64) time.Duration { return 0 }, // retry at once: nothing to wait for
		HandlerTimeout:  50 * time.Millisecond,
		OnEvent:         onIdle(idle),
	})
	if err != nil {
		panic(err)
	}
	runUntil(l, idle, func(s azdispatch.State) bool { return s.Succeeded+s.Poisoned == 4 })

	s := l.State()
	fmt.Printf("succeeded %d, poisoned %d, failed tries %d, retried %d\n", s.Succeeded, s.Poisoned, s.Failed, s.Retried)
	for _, reason := range poisonReasons(ctx, q.PoisonQueue()) {
		fmt.Println("poisoned:", reason)
	}
	// Output:
	// succeeded 3, poisoned 1, failed tries 5, retried 4
	// poisoned: failed 3 times; last error: no such customer
}

// A retry delay passes on the queue's ManualClock, not on the wall clock: the
// test moves time forward and the message comes back at once.
func ExampleManualClock() {
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q := memqueue.New("orders", &memqueue.Options{Clock: clock})
	if _, err := q.Send(ctx, `{"ID":"flaky-1"}`, nil); err != nil {
		panic(err)
	}
	idle := make(chan struct{}, 1)
	l, err := azdispatch.NewListener(q, handleOrder, &azdispatch.ListenerOptions{
		Retry:   func(int64) time.Duration { return 10 * time.Minute },
		OnEvent: onIdle(idle),
	})
	if err != nil {
		panic(err)
	}
	runUntil(l, idle, func(s azdispatch.State) bool {
		if s.Retried == 1 && s.Succeeded == 0 {
			clock.Advance(10 * time.Minute) // wakes the listener, which receives it again
		}
		return s.Succeeded == 1
	})
	fmt.Println("retried", l.State().Retried, "then succeeded", l.State().Succeeded)
	// Output:
	// retried 1 then succeeded 1
}

// onIdle is a ListenerOptions.OnEvent hook that signals on idle, without
// blocking, each time a dequeuer finds the queue empty (EventIdle).
func onIdle(idle chan<- struct{}) func(azdispatch.Event) {
	return func(e azdispatch.Event) {
		if e.Kind == azdispatch.EventIdle {
			select {
			case idle <- struct{}{}:
			default: // a signal is pending already
			}
		}
	}
}

// runUntil runs l until done holds for its State, looking again each time
// a dequeuer finds the queue empty (a signal on idle, from onIdle), then
// stops it and waits for Run to return. It gives up after 10 seconds.
func runUntil(l *azdispatch.Listener[order], idle <-chan struct{}, done func(azdispatch.State) bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var run sync.WaitGroup
	run.Go(func() { _ = l.Run(ctx) })
	for ctx.Err() == nil && !done(l.State()) {
		select {
		case <-idle:
		case <-ctx.Done():
		}
	}
	cancel()
	run.Wait()
}

// poisonReasons reads the reasons of the envelopes in a poison queue.
func poisonReasons(ctx context.Context, poison azdispatch.Source) []string {
	ds, err := poison.Receive(ctx, azdispatch.MaxBatch, time.Minute)
	if err != nil {
		panic(err)
	}
	var reasons []string
	for _, d := range ds {
		env, err := azdispatch.ParsePoison(d.Text)
		if err != nil {
			panic(err)
		}
		reasons = append(reasons, env.Reason)
	}
	sort.Strings(reasons)
	return reasons
}
