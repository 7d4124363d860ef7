package memqueue_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// Peek returns the visible messages in the order a receive would take
// them, leaves them as they are, and skips hidden ones: against a receive
// of the same queue's copy, over random delays.
func TestPeekSeesWhatAReceiveWouldTakeInItsOrder(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	for round := range 50 {
		clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		q := memqueue.New("peek", &memqueue.Options{Clock: clock})
		n := r.IntN(60)
		for i := range n {
			delay := time.Duration(r.IntN(4)) * time.Second
			_, err := q.Send(ctx, string(rune('a'+i%26)), &azdispatch.SendOptions{Delay: delay})
			require.NoError(t, err)
			clock.Advance(time.Duration(r.IntN(2)) * time.Second)
		}
		max := 1 + r.IntN(azdispatch.MaxBatch)
		peeked, err := q.Peek(ctx, max)
		require.NoError(t, err)
		again, err := q.Peek(ctx, max)
		require.NoError(t, err)
		got, err := q.Receive(ctx, max, time.Minute)
		require.NoError(t, err)
		require.Len(t, peeked, len(got), "round %d", round)
		for i := range got {
			assert.Equal(t, got[i].ID, peeked[i].ID, "round %d, %d", round, i)
			assert.Equal(t, peeked[i].ID, again[i].ID, "a peek changes nothing")
			assert.Equal(t, int64(0), peeked[i].DequeueCount)
			assert.Nil(t, peeked[i].Receipt)
		}
	}
}
