package conformance

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
	"github.com/azdispatch/azdispatch/sourcetest"
)

// MemHarness tests memqueue: one memqueue.Queue per NewQueue, or, with
// Shards set, an azdispatch.ShardedQueue over that many. Each queue has a
// ManualClock of its own (shared by its shards and poison queues), so that
// Advance on one subtest's queue does not move another's time.
type MemHarness struct {
	// Shards, if more than 0, makes each queue a ShardedQueue over this many
	// memqueues, with default options: a receive may then read one shard.
	Shards int

	clocks sync.Map // Queue → *memqueue.ManualClock
}

var _ sourcetest.Harness = (*MemHarness)(nil)

// NewQueue returns a new empty memqueue, or sharded queue over memqueues,
// on a new ManualClock that reads this machine's time when made.
func (h *MemHarness) NewQueue(t *testing.T) azdispatch.Shard {
	t.Helper()
	clock := memqueue.NewManualClock(time.Now())
	name := UniqueName(t)
	var q azdispatch.Shard
	if h.Shards <= 0 {
		q = memqueue.New(name, &memqueue.Options{Clock: clock})
	} else {
		shards := make([]azdispatch.Shard, h.Shards)
		for i := range shards {
			shards[i] = memqueue.New(fmt.Sprintf("%s-%d", name, i), &memqueue.Options{Clock: clock})
		}
		sq, err := azdispatch.NewShardedQueue(name, shards, nil)
		require.NoError(t, err)
		q = sq
	}
	h.clocks.Store(q, clock)
	t.Cleanup(func() { h.clocks.Delete(q) })
	return q
}

// Advance moves q's ManualClock forward by d, which wakes listeners on q.
func (h *MemHarness) Advance(t *testing.T, q azdispatch.Shard, d time.Duration) {
	t.Helper()
	c, ok := h.clocks.Load(q)
	require.True(t, ok, "queue %s was not made by this harness", q.Name())
	c.(*memqueue.ManualClock).Advance(d)
}

// Behaviour is Memqueue(); a sharded queue needs a receive per shard to see
// every message.
func (h *MemHarness) Behaviour() sourcetest.Behaviour {
	b := sourcetest.Memqueue()
	if h.Shards > 0 {
		b.Name = fmt.Sprintf("ShardedQueue over %d memqueues", h.Shards)
		b.Sweep = 2 * h.Shards
	}
	return b
}
