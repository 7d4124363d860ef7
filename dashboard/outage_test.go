package dashboard_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A dashboard that runs alone (nothing else sends or receives through its
// sharded queue) over a shard whose account does not answer: its page is
// not held past the shard's try timeout, it names the shard as out, since
// when and why (the dashboard's own reads count in the shard's health), and
// never calls it healthy. (It showed "healthy" beside a shard it could not
// read, and took 31 s.)
func TestADashboardAloneNamesAShardThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	var hang atomic.Bool
	a := memqueue.New("alone-0", nil)
	b := memqueue.New("alone-1", &memqueue.Options{Intercept: func(ctx context.Context, _ string, _ azdispatch.Op) error {
		if hang.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}})
	sq, err := azdispatch.NewShardedQueue("alone", []azdispatch.Shard{a, b}, &azdispatch.ShardedQueueOptions{TryTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{sq}, CacheFor: time.Second})
	code, _, body := get(t, srv, "")
	require.Equal(t, 200, code)
	assert.Contains(t, body, "healthy")

	hang.Store(true)
	time.Sleep(1100 * time.Millisecond) // past the cached reading
	start := time.Now()
	_, _, body = get(t, srv, "")
	took := time.Since(start)
	assert.Less(t, took, 3*time.Second, "held only by the shard's try timeout")
	assert.Contains(t, body, "out since", "the shard is named out")
	assert.NotContains(t, healthOf(body, "alone-1"), "healthy")
	assert.Contains(t, healthOf(body, "alone-1"), "no answer")
	assert.False(t, sq.Health()[1].Healthy, "the dashboard's reads count in the shard's health")
	assert.True(t, sq.Health()[0].Healthy)
}

// healthOf is the health the overview shows for shard name.
func healthOf(body, name string) string {
	i := strings.Index(body, `data-name="`+name+`"`)
	if i < 0 {
		return ""
	}
	rest := body[i:]
	j := strings.Index(rest, "Health:")
	if j < 0 {
		return ""
	}
	rest = rest[j:]
	if k := strings.Index(rest, "</tr>"); k >= 0 {
		rest = rest[:k]
	}
	return rest
}
