package azdispatch_test

import (
	"context"
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
		before := a.Transactions().Receive
		_, err := sq.Receive(ctx, 32, time.Minute)
		require.NoError(t, err)
		if a.Transactions().Receive > before {
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
