package azdispatch_test

import (
	"context"
	"fmt"
	"github.com/azdispatch/azdispatch/internal/azurite"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// hangWhile is a memqueue intercept that holds every call unanswered while
// hang is set, until the call's context ends.
func hangWhile(hang *atomic.Bool) func(context.Context, string, azdispatch.Op) error {
	return func(ctx context.Context, _ string, _ azdispatch.Op) error {
		if hang.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
}

// A receive whose only candidate does not answer asks the shards resting
// after an empty look, rather than report no healthy shard while one of
// them holds a message. (It asked the silent shard alone and failed with
// ErrNoHealthyShard; a listener counted a failed receive.)
func TestAReceiveWhoseCandidateHangsAsksTheRestingShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var hang atomic.Bool
	a := memqueue.New("rest-0", nil)
	b := memqueue.New("rest-1", &memqueue.Options{Intercept: hangWhile(&hang)})
	sq, err := azdispatch.NewShardedQueue("rest", []azdispatch.Shard{a, b},
		&azdispatch.ShardedQueueOptions{EmptySkip: time.Hour, TryTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	// Both resting after empty looks, and b looked at longest ago: the
	// next receive asks b first.
	for {
		beforeA, beforeB := a.Transactions().Receive, b.Transactions().Receive
		_, err := sq.Receive(ctx, 32, time.Minute)
		require.NoError(t, err)
		if a.Transactions().Receive > beforeA && b.Transactions().Receive == beforeB {
			break
		}
	}
	hang.Store(true)
	_, err = a.Send(ctx, "work", nil)
	require.NoError(t, err)
	got, err := sq.Receive(ctx, 32, time.Minute)
	require.NoError(t, err, "a shard answered")
	require.Len(t, got, 1, "the message on the healthy shard")
	assert.Equal(t, "rest-0", got[0].Queue)
	assert.False(t, sq.Health()[1].Healthy, "the silent shard is out")
}

// envelopesIn puts n poison envelopes on q.
func envelopesIn(t *testing.T, q azdispatch.Shard, n int) {
	t.Helper()
	for k := range n {
		text, err := azdispatch.EncodeEnvelopeForTest(&azdispatch.PoisonEnvelope{
			Queue: "x", MessageID: fmt.Sprintf("%s-%d", q.Name(), k), Reason: "test", Body: "work",
		})
		require.NoError(t, err)
		_, err = q.Send(context.Background(), text, nil)
		require.NoError(t, err)
	}
}

// Requeue while one shard's account does not answer: each shard's requests
// are bounded, the silent one fails alone and says so, and the others are
// moved; a requeue over the whole poison set does not take the silent
// shard's "no answer" for "none there". (ShardedQueue.Requeue waited on the
// silent shard for minutes, and its deadline failed the healthy shards too;
// Requeue over the poison set returned nil with half the envelopes left.)
func TestRequeueWhileAShardHangs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var hang atomic.Bool
	a := memqueue.New("rq-0", nil)
	b := memqueue.New("rq-1", &memqueue.Options{Intercept: hangWhile(&hang)})
	sq, err := azdispatch.NewShardedQueue("rq", []azdispatch.Shard{a, b}, &azdispatch.ShardedQueueOptions{TryTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	envelopesIn(t, a.PoisonQueue(), 4)
	envelopesIn(t, b.PoisonQueue(), 4)
	hang.Store(true)

	start := time.Now()
	res, err := sq.Requeue(ctx, nil)
	assert.Less(t, time.Since(start), 5*time.Second, "bounded by the shards' try timeouts")
	require.Error(t, err, "the silent shard's failure is reported")
	assert.Contains(t, err.Error(), "rq-1")
	assert.Equal(t, 4, res.Moved, "the healthy shard's envelopes are moved")
	n, err := a.Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n)

	envelopesIn(t, a.PoisonQueue(), 4)
	res, err = azdispatch.Requeue(ctx, sq.PoisonQueue(), sq, nil)
	require.ErrorIs(t, err, azdispatch.ErrNoHealthyShard, "not done: a shard could not be asked")
	assert.Equal(t, 4, res.Moved)

	hang.Store(false)
	require.Eventually(t, func() bool {
		res, err = azdispatch.Requeue(ctx, sq.PoisonQueue(), sq, nil)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "once it answers again")
	total := 0
	for _, q := range []*memqueue.Queue{a, b} {
		n, err := q.Depth(ctx)
		require.NoError(t, err)
		total += n
	}
	assert.Equal(t, 12, total, "every envelope requeued, none lost")
}

// lateShard is a memqueue shard whose account stops answering while hang
// is set, and carries out the receives it got meanwhile when it comes
// back, their answers long gone: as a stopped emulator, or a partitioned
// endpoint, does with the requests in its sockets.
type lateShard struct {
	*memqueue.Queue
	hang    atomic.Bool
	mu      sync.Mutex
	pending []func()
}

func (s *lateShard) Receive(ctx context.Context, max int, visibility time.Duration) ([]*azdispatch.Delivery, error) {
	if s.hang.Load() {
		s.mu.Lock()
		s.pending = append(s.pending, func() { _, _ = s.Queue.Receive(context.Background(), max, visibility) })
		s.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Queue.Receive(ctx, max, visibility)
}

// resume answers again, carrying out the receives it held first.
func (s *lateShard) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.pending {
		f()
	}
	s.pending = nil
	s.hang.Store(false)
}

// Messages that a receive without an answer hides when its shard comes back
// are looked for when they reappear, not at the listener's idle pace. (Two
// such messages were handled 2 min 24 s after the shard came back.)
func TestMessagesHiddenByALateReceiveAreLookedForWhenTheyReappear(t *testing.T) {
	azurite.SkipUnlessLong(t)
	t.Parallel()
	ctx := context.Background()
	a := memqueue.New("late-0", nil)
	b := &lateShard{Queue: memqueue.New("late-1", nil)}
	sq, err := azdispatch.NewShardedQueue("late", []azdispatch.Shard{a, b},
		&azdispatch.ShardedQueueOptions{TryTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	handled := make(chan time.Time, 1)
	l, err := azdispatch.NewListener(sq, func(_ context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "on the silent shard" {
			select {
			case handled <- time.Now():
			default:
			}
		}
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), VisibilityTimeout: 2 * time.Second})
	require.NoError(t, err)
	running(t, l)
	time.Sleep(200 * time.Millisecond) // the listener idles

	b.hang.Store(true)
	_, err = b.Send(ctx, "on the silent shard", nil) // wakes the listener: its receive asks b
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending) > 0
	}, 10*time.Second, 10*time.Millisecond, "a receive went unanswered")
	// Long enough for the shard's back-off to grow past the listener's
	// own looks for what its failed receives may have hidden.
	time.Sleep(10 * time.Second)
	b.resume()
	resumed := time.Now()
	// A request to b must succeed for the sharded queue to know it is
	// back: a depth reading here, which wakes no listener (a send in this
	// process would, and hide what is measured).
	require.Eventually(t, func() bool {
		_, err := sq.Depth(ctx)
		return err == nil && sq.Health()[1].Healthy
	}, 10*time.Second, 50*time.Millisecond)
	select {
	case at := <-handled:
		t.Logf("handled %v after the shard came back", at.Sub(resumed).Round(time.Millisecond))
		assert.Less(t, at.Sub(resumed), 10*time.Second, "looked for when it reappears, not at the idle pace")
	case <-time.After(time.Minute):
		t.Fatal("not handled within a minute of the shard coming back")
	}
}
