package azdispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A peek shows the front of the queue and changes nothing: the messages stay
// visible, their dequeue counts stay where they were, and a receive after it
// gets them all. It costs one request, counted as Other.
func TestPeekLeavesMessagesAsTheyWere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	sendTexts(t, q, 3, func(i int) string { return []string{"a", "b", "c <&>"}[i] })

	before := q.Transactions()
	got, err := q.Peek(ctx, MaxBatch)
	require.NoError(t, err)
	after := q.Transactions()
	require.Len(t, got, 3)
	assert.Equal(t, []string{"a", "b", "c <&>"}, []string{got[0].Text, got[1].Text, got[2].Text}, "Azurite returns FIFO")
	for _, m := range got {
		assert.NotEmpty(t, m.ID)
		assert.Zero(t, m.DequeueCount)
		assert.Equal(t, q.Name(), m.Queue)
		assert.False(t, m.InsertedAt.IsZero())
		assert.True(t, m.ExpiresAt.After(m.InsertedAt))
	}
	assert.Equal(t, before.Other+1, after.Other, "a peek is counted as Other")
	assert.Equal(t, before.Receive, after.Receive, "a peek is not a receive")

	one, err := q.Peek(ctx, 1)
	require.NoError(t, err)
	require.Len(t, one, 1)
	assert.Equal(t, got[0].ID, one[0].ID)

	ds, err := q.Receive(ctx, MaxBatch, time.Minute)
	require.NoError(t, err)
	require.Len(t, ds, 3, "peeked messages stay visible")
	for _, d := range ds {
		assert.EqualValues(t, 1, d.DequeueCount, "a peek does not count as a dequeue")
	}
	hidden, err := q.Peek(ctx, MaxBatch)
	require.NoError(t, err)
	assert.Empty(t, hidden, "received messages are hidden from a peek")
}

func TestPeekOfAMissingQueueIsEmpty(t *testing.T) {
	t.Parallel()
	q, err := testAccount(t, nil).Queue(uniqueName(t))
	require.NoError(t, err)
	got, err := q.Peek(context.Background(), 5)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestPeekRefusesABadCount(t *testing.T) {
	t.Parallel()
	var q Queue // no request is made
	for _, n := range []int{0, -1, MaxBatch + 1} {
		_, err := q.Peek(context.Background(), n)
		assert.Error(t, err, n)
	}
}

// A sharded peek asks every shard of the view, and of the poison set too.
func TestShardedPeekAsksEveryShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shards, err := AccountShards(uniqueName(t), 3, testAccount(t, nil), testAccount(t, nil))
	require.NoError(t, err)
	s, err := NewShardedQueue("peek", shards, nil)
	require.NoError(t, err)
	for i, sh := range shards {
		for range i + 1 {
			_, err := sh.Send(ctx, sh.Name(), nil)
			require.NoError(t, err)
		}
	}
	got, err := s.Peek(ctx, MaxBatch)
	require.NoError(t, err)
	require.Len(t, got, 6)
	for _, m := range got {
		assert.Equal(t, m.Queue, m.Text, "each message names the shard it is on")
	}
	assert.Equal(t, shards[0].Name(), got[0].Queue, "in shard order")
	assert.Equal(t, shards[2].Name(), got[5].Queue)

	half, err := s.Subset(1, 2)
	require.NoError(t, err)
	got, err = half.Peek(ctx, MaxBatch)
	require.NoError(t, err)
	assert.Len(t, got, 2, "a view peeks only its own shards")

	poison, err := s.poisonQueue().Peek(ctx, MaxBatch)
	require.NoError(t, err)
	assert.Empty(t, poison, "poison queues never created: nothing to see")
}
