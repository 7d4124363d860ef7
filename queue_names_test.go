package azdispatch

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// QueueNames lists the queues that start with a prefix, sorted, and
// nothing else; a prefix no queue has lists none.
func TestQueueNamesListsTheQueuesOfAPrefix(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	ctx := context.Background()
	base := uniqueName(t)
	for _, name := range []string{base + "-1", base + "-0", base + "-1-poison", base + "x"} {
		q, err := a.queue(name, 0)
		require.NoError(t, err)
		require.NoError(t, q.Create(ctx))
	}
	names, err := a.QueueNames(ctx, base+"-")
	require.NoError(t, err)
	assert.Equal(t, []string{base + "-0", base + "-1", base + "-1-poison"}, names)
	names, err = a.QueueNames(ctx, uniqueName(t))
	require.NoError(t, err)
	assert.Empty(t, names)
}

// A send middleware learns which queue took the message: the key's shard
// for a keyed send on a set, the shard round robin chose otherwise, and a
// queue's own name.
func TestOutgoingSentToNamesTheQueueThatTookIt(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	ctx := context.Background()
	sq := shardedQueue(t, 3, nil, a)
	var sentTo string
	tell := SendMiddlewareFunc(func(ctx context.Context, s *Outgoing) error {
		err := s.Next(ctx)
		sentTo = s.SentTo
		return err
	})
	pub, err := NewPublisher[string](sq, &PublisherOptions{Codec: Raw(), Middleware: []SendMiddleware{tell}})
	require.NoError(t, err)
	_, err = pub.SendKeyed(ctx, "customer-7", "keyed")
	require.NoError(t, err)
	assert.Equal(t, sq.Shards()[KeyShard("customer-7", 3)].Name(), sentTo)

	sent, err := pub.Send(ctx, "round robin")
	require.NoError(t, err)
	id := sent.ID
	var holder Shard
	for _, sh := range sq.Shards() {
		if sh.Name() == sentTo {
			holder = sh
		}
	}
	require.NotNil(t, holder, "SentTo %q is a shard of the set", sentTo)
	seen, err := holder.(*Queue).Peek(ctx, MaxBatch)
	require.NoError(t, err)
	var ids []string
	for _, d := range seen {
		ids = append(ids, d.ID)
	}
	assert.Contains(t, ids, id, "the message is on the shard named")

	q := testQueue(t)
	single, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw(), Middleware: []SendMiddleware{tell}})
	require.NoError(t, err)
	_, err = single.Send(ctx, "one")
	require.NoError(t, err)
	assert.Equal(t, q.Name(), sentTo)
}
