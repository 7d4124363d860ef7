package azdispatch_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A dequeuer tries the messages of a receive itself while they are quick;
// one that blocks does not hold up the rest of its receive: they are given
// to other goroutines and run while it blocks. (Here the blocked handler
// returns only once every other message of its receive has been handled.)
func TestASlowHandlerDoesNotHoldUpTheRestOfItsReceive(t *testing.T) {
	t.Parallel()
	q := memqueue.New("dequeue-slow-first", nil)
	for i := range azdispatch.MaxBatch {
		_, err := q.Send(context.Background(), strconv.Itoa(i), nil)
		require.NoError(t, err)
	}
	var others atomic.Int64
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[int]) error {
		if m.Body != 0 {
			others.Add(1)
			return nil
		}
		for others.Load() < azdispatch.MaxBatch-1 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == azdispatch.MaxBatch })
	require.NoError(t, stop())
	s := l.State()
	assert.Zero(t, s.Failed)
	assert.EqualValues(t, azdispatch.MaxBatch, s.Received)
}

// A handler that hangs on the dequeuer's own goroutine does not stop the
// listener receiving: its one dequeuer's loop goes on in another goroutine,
// and a message sent later is handled while the first still hangs.
func TestAHungHandlerDoesNotStopReceiving(t *testing.T) {
	t.Parallel()
	q := memqueue.New("dequeue-hung", nil)
	_, err := q.Send(context.Background(), `"hang"`, nil)
	require.NoError(t, err)
	release := make(chan struct{})
	var hanging, later atomic.Int64
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "hang" {
			hanging.Add(1)
			<-release
			return nil
		}
		later.Add(1)
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{
		MaxDequeuers: 1, Idle: azdispatch.ExponentialIdle(0, 20*time.Millisecond),
	}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "the first handler hangs", func() bool { return hanging.Load() == 1 })
	_, err = q.Send(context.Background(), `"later"`, nil)
	require.NoError(t, err)
	waitUntil(t, "the later message handled", func() bool { return later.Load() == 1 })
	close(release)
	waitUntil(t, "both handled", func() bool { return l.State().Succeeded == 2 })
	require.NoError(t, stop())
}

// A handler that ends the dequeuer's goroutine with runtime.Goexit in the
// middle of a receive loses none of the receive's other messages, and the
// listener goes on receiving and stops cleanly.
func TestGoexitInTheMiddleOfAReceiveLosesNothing(t *testing.T) {
	t.Parallel()
	q := memqueue.New("dequeue-goexit", nil)
	const n = 3 * azdispatch.MaxBatch
	for i := range n {
		_, err := q.Send(context.Background(), strconv.Itoa(i), nil)
		require.NoError(t, err)
	}
	var exits atomic.Int64
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[int]) error {
		if m.Body%7 == 3 && m.DequeueCount == 1 {
			exits.Add(1)
			runtime.Goexit()
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{MaxDequeuers: 2, Idle: azdispatch.ExponentialIdle(0, 20*time.Millisecond)},
		Retry:   func(int64) time.Duration { return 0 },
	})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == n })
	require.NoError(t, stop())
	s := l.State()
	assert.Equal(t, exits.Load(), s.Failed)
	assert.Zero(t, s.InFlight)
	assert.Equal(t, s.Received, s.Succeeded+s.Retried+s.Poisoned+s.Lost+s.Released, "%+v", s)
}

// Handlers that take a while run side by side, even those of one receive
// of one dequeuer: the dequeuer calls them one after another only while
// they are quick.
func TestSlowHandlersOfOneReceiveRunSideBySide(t *testing.T) {
	t.Parallel()
	q := memqueue.New("dequeue-slow-side-by-side", nil)
	for i := range azdispatch.MaxBatch {
		_, err := q.Send(context.Background(), strconv.Itoa(i), nil)
		require.NoError(t, err)
	}
	var inside, most atomic.Int64
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[int]) error {
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == azdispatch.MaxBatch })
	require.NoError(t, stop())
	assert.Greater(t, most.Load(), int64(1), "handler calls at once")
}
