package azdispatch

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/pause"
)

// pausedFleet is three listeners of one queue, each through an account of
// its own, as three processes would be.
type pausedFleet struct {
	listeners []*Listener[job]
	handled   atomic.Int64
}

func startPausedFleet(t *testing.T, open func() *Queue, interval time.Duration) *pausedFleet {
	t.Helper()
	f := &pausedFleet{}
	for range 3 {
		o := quick()
		o.Scaling.ScaleInterval = interval
		l, err := NewListener(open(), func(context.Context, *Message[job]) error {
			f.handled.Add(1)
			return nil
		}, o)
		require.NoError(t, err)
		f.listeners = append(f.listeners, l)
		started(t, l)
	}
	return f
}

// receives is the receives the fleet has made.
func (f *pausedFleet) receives() int64 {
	var n int64
	for _, l := range f.listeners {
		n += l.State().Transactions.Receive
	}
	return n
}

func (f *pausedFleet) allPaused() bool {
	for _, l := range f.listeners {
		if _, on := l.Paused(); !on {
			return false
		}
	}
	return true
}

func TestAPausedQueueStopsEveryListenerWithinAnInterval(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	const interval = 500 * time.Millisecond
	fleet := startPausedFleet(t, func() *Queue {
		other, err := testAccount(t, nil).Queue(q.Name())
		require.NoError(t, err)
		return other
	}, interval)
	sendJobs(t, q, 5)
	waitFor(t, "the first messages handled", func() bool { return fleet.handled.Load() == 5 })

	st, err := q.Pause(ctx, time.Hour, &PauseOptions{By: "ops: the payments API is down"})
	require.NoError(t, err)
	assert.True(t, st.Active(q.ServiceTime()))
	waitFor(t, "every listener paused", fleet.allPaused)
	// A receive that had passed the gate before the pause was read may
	// still be under way: let it end.
	time.Sleep(interval)
	before := fleet.receives()
	sendJobs(t, q, 5)
	time.Sleep(4 * interval)
	assert.Equal(t, before, fleet.receives(), "no receive while paused")
	assert.EqualValues(t, 5, fleet.handled.Load())
	for _, l := range fleet.listeners {
		require.NoError(t, l.Ready(), "a pause is not a failure")
		got := l.State().Paused
		assert.Equal(t, "ops: the payments API is down", got.By)
		assert.Equal(t, st.Until, got.Until)
	}
	read, err := q.PauseState(ctx)
	require.NoError(t, err)
	assert.Equal(t, st, read)

	require.NoError(t, q.Resume(ctx))
	waitFor(t, "the messages sent while paused handled", func() bool { return fleet.handled.Load() == 10 })
	read, err = q.PauseState(ctx)
	require.NoError(t, err)
	assert.Zero(t, read)
	require.NoError(t, q.Resume(ctx), "resuming a queue not paused does nothing")
}

func TestAPauseEndsOnTheServicesClock(t *testing.T) {
	// The service's clock is an hour ahead of this machine's, from its very
	// first answer: a pause of 2 s that a listener judged by its own clock
	// would last an hour and 2 s.
	inst := skewedEmulator(t, time.Hour)
	q := skewedQueue(t, inst, freshAccount(t, inst))
	ctx := context.Background()
	st, err := q.Pause(ctx, 2*time.Second, nil)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Hour), st.Since, time.Minute, "the pause is on the service's clock")

	fleet := startPausedFleet(t, func() *Queue {
		other, err := freshAccount(t, inst).Queue(q.Name())
		require.NoError(t, err)
		return other
	}, 200*time.Millisecond)
	sendJobs(t, q, 3)
	start := time.Now()
	waitFor(t, "the messages handled once the pause ended", func() bool { return fleet.handled.Load() == 3 })
	assert.Less(t, time.Since(start), 30*time.Second)
}

func TestAPauseOfAShardedQueueHoldsWhileAnyShardIsPaused(t *testing.T) {
	a := testAccount(t, nil)
	shards, err := AccountShards(uniqueName(t), 3, a)
	require.NoError(t, err)
	sq, err := NewShardedQueue("set", shards, nil)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, sq.Create(ctx))
	st, err := sq.Pause(ctx, time.Hour, &PauseOptions{By: "ops"})
	require.NoError(t, err)
	for _, sh := range shards {
		got, err := sh.(*Queue).PauseState(ctx)
		require.NoError(t, err)
		assert.Equal(t, "ops", got.By)
	}
	// One shard resumed by hand: the set is still paused.
	require.NoError(t, shards[1].(*Queue).Resume(ctx))
	got, err := sq.PauseState(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.By, got.By)

	l, err := NewListener(sq, func(context.Context, *Message[job]) error { return nil }, quick())
	require.NoError(t, err)
	started(t, l)
	waitFor(t, "the listener paused", func() bool { _, on := l.Paused(); return on })
	require.NoError(t, sq.Resume(ctx))
	got, err = sq.PauseState(ctx)
	require.NoError(t, err)
	assert.Zero(t, got)
}

func TestAPauseEntryNotOursIsTakenAsNone(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	bad := "until=the-day-after-tomorrow"
	_, err := q.client.SetMetadata(ctx, &azqueue.SetMetadataOptions{Metadata: map[string]*string{pause.MetadataName: &bad}})
	require.NoError(t, err)
	_, err = q.PauseState(ctx)
	require.ErrorIs(t, err, pause.ErrMalformed)

	tl := newTally()
	l, err := NewListener(q, tl.handler(func(context.Context, *Message[job]) error { return nil }), quick())
	require.NoError(t, err)
	started(t, l)
	sendJobs(t, q, 2)
	waitFor(t, "messages handled", func() bool { return tl.succeeded() == 2 })
	// A pause written over it replaces it.
	_, err = q.Pause(ctx, time.Minute, nil)
	require.NoError(t, err)
	got, err := q.PauseState(ctx)
	require.NoError(t, err)
	assert.False(t, got.Until.IsZero())
}

func TestAPauseIsChecked(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	_, err := q.Pause(ctx, 0, nil)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	_, err = q.Pause(ctx, time.Minute, &PauseOptions{By: string(make([]byte, pause.MaxBy+1))})
	require.ErrorAs(t, err, &ce)
	_, err = q.Pause(ctx, math.MaxInt64, nil) // "for good": its end would not fit
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "at most 100 years")
	assert.Zero(t, q.Transactions().Total(), "a refused pause makes no request")

	missing, err := testAccount(t, nil).Queue(uniqueName(t))
	require.NoError(t, err)
	_, err = missing.Pause(ctx, time.Minute, nil)
	var se *StorageError
	require.ErrorAs(t, err, &se, "a queue that does not exist cannot be paused")
	assert.Equal(t, 404, se.StatusCode)
}
