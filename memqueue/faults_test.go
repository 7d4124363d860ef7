package memqueue_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// newQueue returns a queue on a ManualClock of its own.
func newQueue(t *testing.T, opts *memqueue.Options) (*memqueue.Queue, *memqueue.ManualClock) {
	t.Helper()
	clock := memqueue.NewManualClock(time.Now())
	var o memqueue.Options
	if opts != nil {
		o = *opts
	}
	o.Clock = clock
	return memqueue.New("q", &o), clock
}

func depth(t *testing.T, q *memqueue.Queue) int {
	t.Helper()
	n, err := q.Depth(context.Background())
	require.NoError(t, err)
	return n
}

func receive(t *testing.T, q *memqueue.Queue, visibility time.Duration) []*azdispatch.Delivery {
	t.Helper()
	got, err := q.Receive(context.Background(), azdispatch.MaxBatch, visibility)
	require.NoError(t, err)
	return got
}

// assertStorageError checks err is the *azdispatch.StorageError an
// azdispatch.Queue would return for op with this status and code.
func assertStorageError(t *testing.T, err error, op azdispatch.Op, status int, code string) {
	t.Helper()
	var se *azdispatch.StorageError
	if assert.ErrorAs(t, err, &se) {
		assert.Equal(t, op, se.Op)
		assert.Equal(t, "q", se.Queue)
		assert.Equal(t, status, se.StatusCode)
		assert.Equal(t, code, se.Code)
	}
}

func TestFailNextDefaultsToServerBusyAndCountsDown(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, nil)
	ctx := context.Background()
	q.FailNext(azdispatch.OpSend, 2, nil)
	for range 2 {
		_, err := q.Send(ctx, "m", nil)
		assertStorageError(t, err, azdispatch.OpSend, http.StatusServiceUnavailable, "ServerBusy")
	}
	assert.Zero(t, depth(t, q), "a failed send stores nothing")
	_, err := q.Send(ctx, "m", nil)
	require.NoError(t, err, "the third send is not armed")
	assert.Equal(t, 1, depth(t, q))
}

func TestFailNextReturnsACustomErrorForItsOpOnly(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, nil)
	ctx := context.Background()
	boom := errors.New("boom")
	q.FailNext(azdispatch.OpReceive, 1, boom)
	_, err := q.Send(ctx, "m", nil)
	require.NoError(t, err, "only receives are armed")

	_, err = q.Receive(ctx, 1, time.Minute)
	assert.Same(t, boom, err)
	got := receive(t, q, time.Minute)
	require.Len(t, got, 1, "the failed receive hid nothing")
	assert.EqualValues(t, 1, got[0].DequeueCount, "nor counted a delivery")
}

func TestLoseNextSendStoresTheMessageButFails(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, nil)
	q.LoseNext(azdispatch.OpSend, 1)
	id, err := q.Send(context.Background(), "m", nil)
	assert.Empty(t, id)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a lost response times out")
	assertStorageError(t, err, azdispatch.OpSend, 0, "")

	got := receive(t, q, time.Minute)
	require.Len(t, got, 1, "the message is there: a retry would send a second copy")
	assert.Equal(t, "m", got[0].Text)
}

func TestLoseNextReceiveHidesTheMessagesAndCountsTheirDelivery(t *testing.T) {
	t.Parallel()
	q, clock := newQueue(t, nil)
	ctx := context.Background()
	for range 2 {
		_, err := q.Send(ctx, "m", nil)
		require.NoError(t, err)
	}
	q.LoseNext(azdispatch.OpReceive, 1)
	got, err := q.Receive(ctx, azdispatch.MaxBatch, 10*time.Second)
	assert.Empty(t, got)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, receive(t, q, time.Minute), "hidden for the lost receive's visibility")

	clock.Advance(11 * time.Second)
	got = receive(t, q, time.Minute)
	require.Len(t, got, 2)
	for _, d := range got {
		assert.EqualValues(t, 2, d.DequeueCount, "the lost receive was a delivery")
	}
}

func TestLoseNextDeleteDeletesButFails(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, nil)
	ctx := context.Background()
	_, err := q.Send(ctx, "m", nil)
	require.NoError(t, err)
	d := receive(t, q, time.Minute)[0]
	q.LoseNext(azdispatch.OpDelete, 1)
	err = q.Delete(ctx, d)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, depth(t, q), "the delete happened")

	err = q.Delete(ctx, d)
	assert.ErrorIs(t, err, azdispatch.ErrOwnershipLost, "a retry finds it gone")
	assertStorageError(t, err, azdispatch.OpDelete, http.StatusNotFound, "MessageNotFound")
}

func TestLoseNextUpdateLeavesTheDeliveryStale(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, nil)
	ctx := context.Background()
	_, err := q.Send(ctx, "m", nil)
	require.NoError(t, err)
	d := receive(t, q, time.Minute)[0]
	q.LoseNext(azdispatch.OpUpdate, 1)
	assert.ErrorIs(t, q.SetVisibility(ctx, d, 0), context.DeadlineExceeded)
	assert.Len(t, receive(t, q, time.Minute), 1, "the release happened")
	assert.ErrorIs(t, q.Delete(ctx, d), azdispatch.ErrOwnershipLost, "its new receipt never reached d")
}

func TestInterceptSeesEveryCallAndFailsItBeforeItActs(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	throttled := errors.New("throttled")
	failSends := true
	q, _ := newQueue(t, &memqueue.Options{Intercept: func(_ context.Context, queue string, op azdispatch.Op) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, queue+" "+string(op))
		if op == azdispatch.OpSend && failSends {
			return throttled
		}
		return nil
	}})
	ctx := context.Background()
	_, err := q.Send(ctx, "m", nil)
	assert.Same(t, throttled, err)
	assert.Zero(t, depth(t, q), "the refused send stored nothing")

	mu.Lock()
	failSends = false
	mu.Unlock()
	_, err = q.Send(ctx, "m", nil)
	require.NoError(t, err)
	d := receive(t, q, time.Minute)[0]
	require.NoError(t, q.SetVisibility(ctx, d, time.Minute))
	require.NoError(t, q.Delete(ctx, d))
	_, err = q.PoisonQueue().Send(ctx, "p", nil)
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{
		"q send", "q depth", "q send", "q receive", "q update", "q delete",
		"q-poison send", // the poison queue shares the hook, under its own name
	}, seen)
}

func TestTransactionsCountEveryRequestByKind(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, nil)
	ctx := context.Background()
	for range 2 {
		_, err := q.Send(ctx, "m", nil)
		require.NoError(t, err)
	}
	got := receive(t, q, time.Minute)
	require.Len(t, got, 2)
	assert.Empty(t, receive(t, q, time.Minute))
	require.NoError(t, q.SetVisibility(ctx, got[0], time.Minute))
	require.NoError(t, q.Delete(ctx, got[0]))
	require.Error(t, q.Delete(ctx, got[0]), "a stale receipt is a request refused by the service")
	depth(t, q)

	q.FailNext(azdispatch.OpSend, 1, nil)
	_, err := q.Send(ctx, "m", nil)
	require.Error(t, err, "a throttled request is billed")
	_, err = q.Send(ctx, string(make([]byte, memqueue.MaxTextSize+1)), nil)
	require.Error(t, err, "refused before any request, as azdispatch.Queue refuses it")
	_, err = q.Receive(ctx, 0, time.Minute)
	require.Error(t, err, "likewise")

	assert.Equal(t, azdispatch.Transactions{Send: 3, Receive: 2, EmptyReceive: 1, Update: 1, Delete: 2, Depth: 1},
		q.Transactions())
}
