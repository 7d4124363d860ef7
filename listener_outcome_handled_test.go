package azdispatch_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A message whose handler succeeded but whose delete keeps failing (a
// throttled account, say) is not handled again when it comes back, and is
// never poisoned for it, however often it is delivered: the listener
// remembers it and only deletes it.
func TestHandledMessageWhoseDeleteFailsIsDeletedNotRunAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q := memqueue.New("handled-before", &memqueue.Options{Clock: clock})
	_, err := q.Send(ctx, `{"ID":"a"}`, nil)
	require.NoError(t, err)
	q.FailNext(azdispatch.OpDelete, 3, nil) // 503 ServerBusy, three times

	var calls atomic.Int64
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[struct{ ID string }]) error {
		calls.Add(1)
		return nil
	}, &azdispatch.ListenerOptions{MaxDequeueCount: 2, VisibilityTimeout: time.Second})
	require.NoError(t, err)
	runPastFailedDeletes(t, l, clock, func(s azdispatch.State) bool { return s.Succeeded == 1 })

	s := l.State()
	assert.EqualValues(t, 1, calls.Load(), "handled once, on its first delivery")
	assert.EqualValues(t, 3, s.Lost, "three deliveries whose delete failed")
	assert.EqualValues(t, 1, s.HandledBefore, "the fourth only deleted it")
	assert.Zero(t, s.Poisoned, "delivered 4 times with MaxDequeueCount 2, never poisoned")
	assert.Zero(t, s.Failed)
	depth, err := q.Depth(ctx)
	require.NoError(t, err)
	assert.Zero(t, depth)
}

// runPastFailedDeletes runs l until done says so, moving clock past the
// visibility timeout (1 s) after each failed delete, so that the message
// comes back at once.
func runPastFailedDeletes[T any](t *testing.T, l *azdispatch.Listener[T], clock *memqueue.ManualClock, done func(azdispatch.State) bool) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Go(func() { _ = l.Run(ctx) })
	lost := int64(0)
	require.Eventually(t, func() bool {
		s := l.State()
		if s.Lost > lost {
			lost = s.Lost
			clock.Advance(2 * time.Second)
		}
		return done(s)
	}, 10*time.Second, time.Millisecond)
	stop()
	run.Wait()
}
