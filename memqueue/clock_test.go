package memqueue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

func TestManualClockAdvanceWakesSubscribersUntilCancelled(t *testing.T) {
	t.Parallel()
	q, clock := newQueue(t, nil)
	var woken atomic.Int64
	cancel := q.Subscribe(func() { woken.Add(1) })
	start := clock.Now()
	clock.Advance(time.Second)
	assert.Equal(t, start.Add(time.Second), clock.Now())
	assert.EqualValues(t, 1, woken.Load(), "an Advance wakes the queue's subscribers")

	clock.Advance(-time.Hour)
	assert.Equal(t, start.Add(time.Second), clock.Now(), "a negative Advance does not move the clock")
	cancel()
	clock.Advance(time.Second)
	assert.EqualValues(t, 2, woken.Load(), "no wake-up after cancel")
}

// A listener backing off on an empty queue wakes when the clock makes a
// delayed message due, without waiting out its back-off: a test's Advance
// is seen at once.
func TestManualClockWakesAnIdleListener(t *testing.T) {
	t.Parallel()
	q, clock := newQueue(t, nil)
	_, err := q.Send(context.Background(), `"due later"`, &azdispatch.SendOptions{Delay: time.Minute})
	require.NoError(t, err)

	var handled atomic.Int64
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error {
		handled.Add(1)
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			// Back off for an hour after every empty receive: only a wake-up
			// can bring the next one within the test.
			Idle: func(azdispatch.State, int) (time.Duration, bool) { return time.Hour, false },
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(time.Minute):
			t.Error("Run did not return")
		}
	}()

	require.Eventually(t, func() bool { return l.State().IdleDequeuers == 1 }, 10*time.Second, time.Millisecond,
		"the listener found nothing and backs off")
	clock.Advance(time.Minute)
	require.Eventually(t, func() bool { return handled.Load() == 1 }, 10*time.Second, time.Millisecond,
		"the Advance woke the listener, which received the message now due")
	// Succeeded counts once the delete after the handler is done: it may
	// trail the handler's return.
	require.Eventually(t, func() bool { return l.State().Succeeded == 1 }, 10*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, handled.Load())
}
