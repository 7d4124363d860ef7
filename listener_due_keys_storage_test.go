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

// Where every message of a key reaches one reader (keyed shards, a Subset
// each), a limit of one per key holds across the readers at no cost: no
// lease, no snooze, no request the same run without a limit would not
// make. Against Azurite, with three readers of three shards.
func TestAKeyLimitOverSubsetsCostsNoRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq := shardedQueue(t, 3, nil, testAccount(t, nil))
	pub, err := NewPublisher[string](sq, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	const keys, each = 30, 4
	for i := range keys * each {
		_, err := pub.SendKeyed(ctx, fmt.Sprint("customer-", i%keys), fmt.Sprint(i))
		require.NoError(t, err)
	}
	var mu sync.Mutex
	inside, done, overlaps := map[string]int{}, 0, 0
	handler := func(_ context.Context, m *Message[string]) error {
		mu.Lock()
		if inside[m.Key]++; inside[m.Key] > 1 {
			overlaps++
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		inside[m.Key]--
		done++
		mu.Unlock()
		return nil
	}
	var ls []*Listener[string]
	for i := range 3 {
		sub, err := sq.Subset(i, 3)
		require.NoError(t, err)
		l, err := NewListener(sub, handler, &ListenerOptions{Codec: Raw(), Limits: LimitOptions{PerKey: 1},
			Scaling: ScalingOptions{Idle: ExponentialIdle(0, 50*time.Millisecond)}})
		require.NoError(t, err)
		ls = append(ls, l)
		ctx, cancel := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() { stopped <- l.Run(ctx) }()
		t.Cleanup(func() { cancel(); require.NoError(t, <-stopped) })
	}
	// A message is deleted after its handler returns: wait for both, or the
	// count of deletes read below can lag the last handler by one request.
	deletes := func() (n int64) {
		for _, l := range ls {
			n += l.State().Transactions.Delete
		}
		return n
	}
	waitFor(t, "every message handled and deleted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done == keys*each && deletes() >= keys*each
	})
	mu.Lock()
	assert.Zero(t, overlaps, "two of a key at once")
	mu.Unlock()
	var tx Transactions
	var waited int64
	for _, l := range ls {
		s := l.State()
		tx.BlobLease += s.Transactions.BlobLease
		tx.Update += s.Transactions.Update
		tx.Delete += s.Transactions.Delete
		waited += s.KeyWaits
		assert.Zero(t, s.Snoozed)
	}
	assert.Zero(t, tx.BlobLease, "no lease")
	assert.Zero(t, tx.Update, "no snooze, no release")
	assert.EqualValues(t, keys*each, tx.Delete, "one delete per message, as without a limit")
	t.Logf("%d messages of %d keys over 3 subsets: %d waited in hand for their key, at no request", keys*each, keys, waited)
}
