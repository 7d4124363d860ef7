package azdispatch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Against Azurite: a batch handler with no window costs no request per
// message over a handler for one message at a time (a receive per 32
// messages, a delete each), and is called once per receive, with up to
// 32 messages.
func TestABatchHandlerCostsNoRequestOverOneMessageAtATime(t *testing.T) {
	t.Parallel()
	const n = 320
	var mu sync.Mutex
	largest := 0
	run := func(batch bool) State {
		q := testQueue(t)
		sendJobs(t, q, n)
		opts := &ListenerOptions{Scaling: ScalingOptions{MaxDequeuers: 1, Idle: ExponentialIdle(0, 50*time.Millisecond)}}
		var l *Listener[job]
		var err error
		if batch {
			l, err = NewBatchListener(q, func(_ context.Context, msgs []*Message[job]) error {
				mu.Lock()
				largest = max(largest, len(msgs))
				mu.Unlock()
				return nil
			}, opts)
		} else {
			l, err = NewListener(q, func(context.Context, *Message[job]) error { return nil }, opts)
		}
		require.NoError(t, err)
		stop := started(t, l)
		waitFor(t, "all handled", func() bool { return l.State().Succeeded == n })
		require.NoError(t, stop())
		assertSettled(t, l.State())
		return l.State()
	}
	single, batched := run(false), run(true)
	perMessage := func(s State) float64 {
		return float64(s.Transactions.Total()-s.Transactions.EmptyReceive) / n
	}
	tx := batched.Transactions
	full := tx.Receive - tx.EmptyReceive
	assert.EqualValues(t, n, tx.Delete, "one delete per message")
	assert.Zero(t, tx.Update, "nothing released or renewed")
	assert.Equal(t, full, batched.Calls, "one call per receive that brought messages")
	assert.LessOrEqual(t, full, int64(n/MaxBatch+2), "full receives")
	assert.LessOrEqual(t, largest, MaxBatch)
	assert.LessOrEqual(t, perMessage(batched), perMessage(single)+2.0/n, "at most two partial receives more")
	t.Logf("requests per message (empty receives aside): one at a time %.4f, batch handler %.4f; %d calls of %.1f messages on average",
		perMessage(single), perMessage(batched), batched.Calls, float64(batched.CallMessages)/float64(batched.Calls))
}

// Against Azurite: with keyed shards and a Subset each, every key's
// messages reach one listener, and a batch handler by key gathers them
// there: every call holds one key, and no key is called by two listeners.
func TestABatchByKeyGathersAKeysMessagesInOneListener(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq := shardedQueue(t, 2, nil, testAccount(t, nil))
	pub, err := NewPublisher[string](sq, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	const keys, each = 12, 5
	for i := range keys * each {
		_, err := pub.SendKeyed(ctx, fmt.Sprint("customer-", i%keys), fmt.Sprint(i))
		require.NoError(t, err)
	}
	var mu sync.Mutex
	byListener := map[string]int{} // key: the listener that called it
	handled := 0
	for i := range 2 {
		sub, err := sq.Subset(i, 2)
		require.NoError(t, err)
		l, err := NewBatchListener(sub, func(_ context.Context, msgs []*Message[string]) error {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				assert.Equal(t, msgs[0].Key, m.Key, "a call of one key")
				if who, ok := byListener[m.Key]; ok {
					assert.Equal(t, i, who, "key %s called by two listeners", m.Key)
				}
				byListener[m.Key] = i
			}
			handled += len(msgs)
			return nil
		}, &ListenerOptions{Codec: Raw(), Batch: BatchOptions{ByKey: true, MaxItems: each, MaxWait: 500 * time.Millisecond},
			Scaling: ScalingOptions{Idle: ExponentialIdle(0, 50*time.Millisecond)}})
		require.NoError(t, err)
		stop := started(t, l)
		t.Cleanup(func() { require.NoError(t, stop()) })
	}
	waitFor(t, "every message handled", func() bool { mu.Lock(); defer mu.Unlock(); return handled == keys*each })
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, byListener, keys)
}
