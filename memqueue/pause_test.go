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

	clock.Advance(time.Hour)
	require.Eventually(t, func() bool { return handled.Load() == 3 }, 10*time.Second, 5*time.Millisecond,
		"the pause ends on the queue's clock")
	_, on := l.Paused()
	assert.False(t, on)
}
