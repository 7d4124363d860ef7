package azdispatch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What order per key costs against Azurite, with two listeners on one
// queue (two processes, as far as the keys' leases and order go): every
// key's messages in send order, and the requests per message beyond a
// listener without limits, which the README's cost table states.
func TestOrderPerKeyCostsAgainstTheEmulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	pub, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	const keys, each = 20, 8
	for i := range each {
		for k := range keys {
			_, err := pub.SendKeyed(ctx, fmt.Sprint("customer-", k), fmt.Sprintf("%d/%d", k, i))
			require.NoError(t, err)
		}
	}
	var mu sync.Mutex
	ran := map[string][]int{}
	done, overlaps := 0, 0
	inside := map[string]bool{}
	handler := func(_ context.Context, m *Message[string]) error {
		k, n, _ := strings.Cut(m.Body, "/")
		i, _ := strconv.Atoi(n)
		mu.Lock()
		if inside[k] {
			overlaps++
		}
		inside[k] = true
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		inside[k] = false
		ran[k] = append(ran[k], i)
		done++
		return nil
	}
	var ls []*Listener[string]
	for range 2 {
		l, err := NewListener(q, handler, &ListenerOptions{Codec: Raw(), Limits: LimitOptions{InOrder: true},
			Scaling: ScalingOptions{Idle: ExponentialIdle(0, 50*time.Millisecond), BatchSize: 16}})
		require.NoError(t, err)
		ls = append(ls, l)
		ctx, cancel := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() { stopped <- l.Run(ctx) }()
		t.Cleanup(func() { cancel(); require.NoError(t, <-stopped) })
	}
	waitFor(t, "every message handled", func() bool { mu.Lock(); defer mu.Unlock(); return done >= keys*each })
	mu.Lock()
	assert.Zero(t, overlaps, "two of a key at once")
	for k := range keys {
		want := make([]int, each)
		for i := range want {
			want[i] = i
		}
		assert.Equal(t, want, ran[fmt.Sprint(k)], "key %d in send order", k)
	}
	mu.Unlock()
	waitFor(t, "every message deleted", func() bool {
		var deleted int64
		for _, l := range ls {
			deleted += l.State().Transactions.Delete
		}
		return deleted >= keys*each
	})
	var tx Transactions
	var waits, snoozed, elsewhere int64
	for _, l := range ls {
		s := l.State()
		tx.BlobLease += s.Transactions.BlobLease
		tx.BlobWrite += s.Transactions.BlobWrite
		tx.BlobRead += s.Transactions.BlobRead
		tx.Update += s.Transactions.Update
		tx.Delete += s.Transactions.Delete
		waits, snoozed, elsewhere = waits+s.OrderWaits, snoozed+s.Snoozed, elsewhere+s.KeysHeldElsewhere
		assert.Zero(t, s.OrderGapsSkipped)
		assert.Zero(t, s.Poisoned)
	}
	n := float64(keys * each)
	t.Logf("%d messages of %d keys, 2 listeners: per message %.2f Lease Blob, %.2f blob writes (Set Blob Metadata; a Put Blob per key), %.2f Get Blob Properties, %.2f Update Message (%d snoozes: %d for order, %d for a key held by the other listener)",
		keys*each, keys, float64(tx.BlobLease)/n, float64(tx.BlobWrite)/n, float64(tx.BlobRead)/n, float64(tx.Update)/n, snoozed, waits, elsewhere)
	assert.EqualValues(t, keys*each, tx.Delete, "one delete per message")
	assert.LessOrEqual(t, tx.BlobWrite, int64(keys*each+keys+waits), "one write per message, a Put Blob per key, one per stuck key")
	// Each delivery that takes the key (a message's, and each of its
	// snoozes') costs an acquire and a release, and a read where the
	// other listener wrote the key last.
	takes := int64(keys*each) + snoozed
	assert.LessOrEqual(t, tx.BlobLease, 2*takes+int64(4*keys), "an acquire and a release at most per delivery")
	assert.LessOrEqual(t, tx.BlobRead, takes+int64(keys), "a read at most per delivery")
}
