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

func TestAListenerOnAPausedMemqueueReceivesNothingUntilThePauseEnds(t *testing.T) {
	q, clock := newQueue(t, nil)
	ctx := context.Background()
	_, err := q.Pause(ctx, time.Hour, &azdispatch.PauseOptions{By: "test"})
	require.NoError(t, err)
	p, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	for range 3 {
		_, err := p.Send(ctx, "job")
		require.NoError(t, err)
	}
	var handled atomic.Int64
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error {
		handled.Add(1)
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{ScaleInterval: 20 * time.Millisecond}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	defer func() { stop(); require.NoError(t, <-done) }()

	require.Eventually(t, func() bool { _, on := l.Paused(); return on }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.Zero(t, q.Transactions().Receive, "no receive while paused")
	assert.Zero(t, handled.Load())
	assert.Equal(t, "test", l.State().Paused.By)

	clock.Advance(time.Hour + time.Second) // an hour at least, to the second
	require.Eventually(t, func() bool { return handled.Load() == 3 }, 10*time.Second, 5*time.Millisecond,
		"the pause ends on the queue's clock")
	_, on := l.Paused()
	assert.False(t, on)
}

// A listener whose handlers are all busy when the pause comes (they hang
// on the downstream the pause is for) receives nothing more once they
// finish: its dequeuer, waiting for slots past the gate, looks again.
func TestAFullListenerReceivesNothingOnceItsHandlersFinishInAPause(t *testing.T) {
	q, _ := newQueue(t, nil)
	ctx := context.Background()
	for range 5 {
		_, err := q.Send(ctx, "job", nil)
		require.NoError(t, err)
	}
	release := make(chan struct{})
	var started atomic.Int64
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error {
		started.Add(1)
		<-release
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Concurrency: 2,
		Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1, BatchSize: 2, ScaleInterval: 20 * time.Millisecond}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	defer func() { stop(); require.NoError(t, <-done) }()

	require.Eventually(t, func() bool { return started.Load() == 2 }, 10*time.Second, time.Millisecond, "both slots busy")
	receives := q.Transactions().Receive
	_, err = q.Pause(ctx, time.Hour, nil)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // more than the scale interval: the last reading is stale
	close(release)
	require.Eventually(t, func() bool { _, on := l.Paused(); return on && l.State().InFlight == 0 }, 10*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // room for a receive, were one to come
	assert.Equal(t, receives, q.Transactions().Receive, "no receive once paused")
	assert.EqualValues(t, 2, started.Load())
}
