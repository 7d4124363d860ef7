package endpoint

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// hidden is a queue whose sends wake no one in this process: as if another
// process sent to it.
type hidden struct {
	azdispatch.Shard
	q *memqueue.Queue
}

func (h hidden) PoisonQueue() azdispatch.Shard { return h.q.PoisonQueue() }

// A wake-up that names a queue of a set has that queue read at once, though
// it was found empty a moment ago and another queue keeps every receive
// busy: without the name it would rest for EmptySkip (an hour here).
func TestAWakeUpNamingAQueueHasASetReadItAtOnce(t *testing.T) {
	t.Parallel()
	quiet, busy := memqueue.New("quiet", nil), memqueue.New("busy", nil)
	set, err := azdispatch.NewQueueSet("tenants", []azdispatch.SetMember{{Queue: hidden{quiet, quiet}}, {Queue: hidden{busy, busy}}},
		&azdispatch.QueueSetOptions{ShardedQueueOptions: azdispatch.ShardedQueueOptions{EmptySkip: time.Hour}})
	require.NoError(t, err)
	ctx := t.Context()
	for range 3000 {
		_, err := busy.Send(ctx, `"busy"`, nil)
		require.NoError(t, err)
	}
	var quietDone atomic.Bool
	l, err := azdispatch.NewListener(set, func(ctx context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "quiet" {
			quietDone.Store(true)
		}
		time.Sleep(time.Millisecond)
		return nil
	}, &azdispatch.ListenerOptions{Concurrency: 4, Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1, BatchSize: 2}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	defer func() { stop(); <-done }()
	require.Eventually(t, func() bool { return !set.State()[0].LastRead.IsZero() }, time.Minute, time.Millisecond, "the quiet queue looked at")

	var h WakeHandler
	defer h.SubscribeQueue(set.Notify)()
	srv := httptest.NewServer(&h)
	defer srv.Close()
	n := NewNotifier(srv.URL, nil)
	go func() { _ = n.Run(runCtx) }()
	_, err = quiet.Send(ctx, `"quiet"`, nil)
	require.NoError(t, err)
	n.NotifyQueue("quiet")
	require.Eventually(t, quietDone.Load, 30*time.Second, time.Millisecond, "the quiet queue's message handled")
	d, err := busy.Depth(ctx)
	require.NoError(t, err)
	assert.Positive(t, d, "the busy queue still had messages: the name, not its draining, had the quiet one read")
}

// A wake-up passes on the names a queue may have, at most MaxWakeQueues,
// and leaves out the rest; it wakes the plain subscribers all the same.
func TestAWakeUpPassesOnValidQueueNamesOnly(t *testing.T) {
	t.Parallel()
	var h WakeHandler
	var named []string
	var woken int
	defer h.SubscribeQueue(func(q string) { named = append(named, q) })()
	defer h.Subscribe(func() { woken++ })()
	target := "/wake?queue=tenant-a&queue=Bad_Name&queue=x&queue=" + strings.Repeat("a", 64)
	for i := range MaxWakeQueues + 5 {
		target += "&queue=q" + strings.Repeat("b", 2+i%3)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, target, nil))
	assert.Equal(t, http.StatusNoContent, rec.Code)
	assert.Equal(t, 1, woken)
	require.Len(t, named, MaxWakeQueues)
	assert.Equal(t, "tenant-a", named[0])
	for _, q := range named {
		assert.True(t, validQueueName(q), q)
	}
}

// The depth endpoint answers a queue set's total and each of its queues,
// with their oldest ages: one KEDA trigger for all of them.
func TestDepthHandlerAnswersAQueueSetAndEachQueue(t *testing.T) {
	t.Parallel()
	a, b := testQueue(t), testQueue(t)
	send(t, a, 2, "work")
	send(t, b, 3, "work")
	set, err := azdispatch.NewQueueSet("tenants", []azdispatch.SetMember{{Queue: a}, {Queue: b}},
		&azdispatch.QueueSetOptions{ShardedQueueOptions: azdispatch.ShardedQueueOptions{TryTimeout: 30 * time.Second}})
	require.NoError(t, err)
	h, err := NewDepthHandler(set, &DepthOptions{CacheFor: -1})
	require.NoError(t, err)
	code, body := get(t, h)
	require.Equal(t, http.StatusOK, code, "%s", body)
	n, ok := gjsonNumber(body, kedaValueLocation)
	require.True(t, ok)
	assert.Equal(t, float64(5), n)
	var rep depthReport
	require.NoError(t, json.Unmarshal(body, &rep))
	assert.Equal(t, "tenants", rep.Queue)
	require.Len(t, rep.Shards, 2)
	for i, want := range []int{2, 3} {
		require.NotNil(t, rep.Shards[i].Depth)
		assert.Equal(t, want, *rep.Shards[i].Depth, rep.Shards[i].Name)
	}
}
