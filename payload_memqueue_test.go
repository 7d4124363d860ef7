package azdispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// Over a memqueue, with no emulator, what needs a payload store runs on
// the queue's own, in memory on its clock.

// A message too large for the queue is offloaded to the memqueue's store,
// handled whole, and its blob deleted after it.
func TestMemqueueRunsAClaimCheckedMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("mem-claim", nil)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	body := strings.Repeat("x", azdispatch.MaxMessageSize+1)
	_, err = pub.Send(ctx, body)
	require.NoError(t, err)
	ds, err := q.Peek(ctx, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Less(t, len(ds[0].Text), 1024, "a pointer on the queue")

	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	waitUntil(t, "handled", func() bool { return l.State().Succeeded == 1 })
	require.Len(t, h.get(), 1)
	assert.Equal(t, body, h.get()[0].m.Body)
	waitUntil(t, "its blob deleted", func() bool {
		res, err := azdispatch.Sweep(ctx, q.PayloadStore(), &azdispatch.SweepOptions{DryRun: true})
		require.NoError(t, err)
		return res.Scanned == 0
	})
	tx := q.Transactions()
	assert.Equal(t, int64(1), tx.BlobWrite, "the payload's write")
	assert.Equal(t, int64(1), tx.BlobRead, "its read")
	assert.Equal(t, int64(1), tx.BlobDelete, "its delete")
}

// A batch goes to the memqueue's store as one blob behind one message, and
// each item is handled.
func TestMemqueueRunsASendBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("mem-batch", nil)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	b, err := pub.SendBatch(ctx, []string{"a", "b", "c"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, b.Items)
	n, err := q.Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one message for the batch")

	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	waitUntil(t, "handled", func() bool { return len(h.get()) == 3 && l.State().Succeeded == 1 })
	var bodies []string
	for _, c := range h.get() {
		bodies = append(bodies, c.m.Body)
		assert.Equal(t, b.BatchID, c.m.BatchID)
	}
	assert.ElementsMatch(t, []string{"a", "b", "c"}, bodies)
}

// A message sent 400 days ahead, on a manual clock, is hidden again each
// week and handled once when due; the record of its delivery (which a late
// cancel reads) is kept in the memqueue's store.
func TestMemqueueRunsA400DayDelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	q := memqueue.New("mem-400", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	s, err := pub.SendAfter(ctx, "renew", 400*24*time.Hour)
	require.NoError(t, err)

	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	hops := int64(0)
	for clock.Now().Add(week).Before(s.Due) {
		clock.Advance(week)
		hops++
		waitUntil(t, "hop", func() bool { return l.State().Rehidden == hops })
	}
	require.Empty(t, h.get(), "handled before it was due")
	clock.Advance(s.Due.Sub(clock.Now()))
	waitUntil(t, "handled", func() bool { return l.State().Succeeded == 1 })
	require.Len(t, h.get(), 1)
	assert.WithinRange(t, h.get()[0].at, s.Due, s.Due.Add(time.Second))
	res, err := azdispatch.Sweep(ctx, q.PayloadStore(), &azdispatch.SweepOptions{DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Records, "the record of its delivery")
	assert.Equal(t, 1, res.Live)
}

// A second send with a unique key within its window fails with
// ErrDuplicate; once the window has passed on the queue's clock, the key
// is taken over.
func TestMemqueueRunsAUniqueSend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, clock, q, pub := b.ctx, b.clock, b.queue, b.pub
	once := &azdispatch.SendOptions{UniqueKey: "invoice-42", UniqueFor: time.Hour}
	_, err := pub.SendWith(ctx, "first", once)
	require.NoError(t, err)
	_, err = pub.SendWith(ctx, "second", once)
	require.ErrorIs(t, err, azdispatch.ErrDuplicate)
	clock.Advance(time.Hour + 2*time.Second)
	_, err = pub.SendWith(ctx, "third", once)
	require.NoError(t, err, "the window has passed")
	n, err := q.Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	// A key's write that fails gives the send up, before any message.
	q.FailNext(memqueue.OpBlobWrite, 1, nil)
	_, err = pub.SendWith(ctx, "fourth", &azdispatch.SendOptions{UniqueKey: "invoice-43", UniqueFor: time.Hour})
	var se *azdispatch.StorageError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 503, se.StatusCode)
	n, err = q.Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}

// A message sent for later is cancelled before it is due, its record kept
// in the memqueue's store: a second cancel says so, and no listener runs
// it. One sent 400 days ahead, which listeners hide again, is cancelled
// by its record: the listener that receives it when due drops it.
func TestMemqueueRunsACancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	q := memqueue.New("mem-cancel", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	soon, err := pub.SendAfter(ctx, "soon", time.Hour)
	require.NoError(t, err)
	require.NotEmpty(t, soon.Token)
	far, err := pub.SendAfter(ctx, "far", 400*24*time.Hour)
	require.NoError(t, err)
	kept, err := pub.SendAfter(ctx, "kept", time.Hour)
	require.NoError(t, err)

	require.NoError(t, pub.Cancel(ctx, soon.Token))
	assert.ErrorIs(t, pub.Cancel(ctx, soon.Token), azdispatch.ErrAlreadyCancelled)

	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	clock.Advance(week)
	waitUntil(t, "the kept one handled, the far one hidden again", func() bool {
		s := l.State()
		return s.Succeeded == 1 && s.Rehidden == 1
	})
	require.NoError(t, pub.Cancel(ctx, far.Token), "cancelled by its record: a listener has hidden it again")
	assert.ErrorIs(t, pub.Cancel(ctx, kept.Token), azdispatch.ErrAlreadyDelivered)
	for clock.Now().Before(far.Due) {
		clock.Advance(week)
	}
	waitUntil(t, "dropped when due", func() bool { return l.State().Cancelled == 1 })
	require.Len(t, h.get(), 1)
	assert.Equal(t, "kept", h.get()[0].m.Body)
	n, err := q.Depth(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
}
