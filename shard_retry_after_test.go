package azdispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A shard that answers 503 with Retry-After is left alone for as long as
// the service asked, not the one second a throttled shard otherwise gets.
func TestShardBreakerHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := memqueue.New("shard-a", nil), memqueue.New("shard-b", nil)
	sq, err := azdispatch.NewShardedQueue("tasks", []azdispatch.Shard{a, b}, nil)
	require.NoError(t, err)
	busy := &azdispatch.StorageError{Op: "send", Queue: "shard-a", StatusCode: 503, Code: "ServerBusy", RetryAfter: time.Minute}
	a.FailNext(azdispatch.OpSend, 1, busy)
	b.FailNext(azdispatch.OpSend, 1, busy)
	before := time.Now()
	for range 4 {
		_, _ = sq.Send(ctx, "x", nil)
	}
	for _, h := range sq.Health() {
		if h.Healthy {
			continue
		}
		assert.False(t, h.RetryAt.Before(before.Add(time.Minute)), "shard %s retried at %v, before the minute asked for", h.Shard, h.RetryAt.Sub(before))
		assert.ErrorIs(t, h.LastError, busy)
	}
	unhealthy := 0
	for _, h := range sq.Health() {
		if !h.Healthy {
			unhealthy++
		}
	}
	assert.Positive(t, unhealthy)
}
