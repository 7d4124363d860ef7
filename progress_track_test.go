package azdispatch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// trackSetup is a memqueue with a publisher, and a listener on it whose
// handler is h.
func trackSetup(t *testing.T, q *memqueue.Queue, h azdispatch.Handler[string]) (*azdispatch.Publisher[string], *azdispatch.Listener[string]) {
	t.Helper()
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	l, err := azdispatch.NewListener(q, h, &azdispatch.ListenerOptions{
		Codec: azdispatch.Raw(), MaxDequeueCount: 3, VisibilityTimeout: time.Second,
		Retry:   func(int64) time.Duration { return 0 },
		Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MaxDequeuers: 1}, Concurrency: 1,
	})
	require.NoError(t, err)
	return pub, l
}

// A tracked message's status follows it: pending once sent, delivered
// while its handler runs, failed after a try that failed, succeeded once
// deleted; and stays succeeded.
func TestATrackedMessageIsPendingDeliveredFailedThenSucceeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("tracked", nil)
	store := q.PayloadStore()
	var token atomic.Value
	var seen []string
	var calls atomic.Int32
	pub, l := trackSetup(t, q, func(ctx context.Context, m *azdispatch.Message[string]) error {
		st, err := store.MessageStatus(ctx, token.Load().(string))
		if assert.NoError(t, err) {
			seen = append(seen, st.State)
			assert.Equal(t, m.ID, st.MessageID)
		}
		if calls.Add(1) == 1 {
			return errors.New("the first try fails")
		}
		return nil
	})
	sent, err := pub.SendWith(ctx, "x", &azdispatch.SendOptions{Track: true})
	require.NoError(t, err)
	require.NotEmpty(t, sent.StatusToken)
	assert.NotEqual(t, sent.Token, sent.StatusToken, "the status token gives no power over the message")
	token.Store(sent.StatusToken)
	st, err := store.MessageStatus(ctx, sent.StatusToken)
	require.NoError(t, err)
	assert.Equal(t, "pending", st.State)
	assert.Equal(t, "tracked", st.Queue)
	assert.False(t, st.Final)

	runUntil(t, l, func(st azdispatch.State) bool { return st.Succeeded == 1 })
	assert.Equal(t, []string{"delivered", "delivered"}, seen, "each call sees its delivery")
	st, err = store.MessageStatus(ctx, sent.StatusToken)
	require.NoError(t, err)
	assert.Equal(t, "succeeded", st.State)
	assert.True(t, st.Final)
	assert.Equal(t, 2, st.Tries)
	assert.Equal(t, sent.ID, st.MessageID)
	assert.False(t, st.Updated.IsZero())
}

// A tracked message that is poisoned says so, with the reason; one that
// is cancelled while it waits says cancelled.
func TestATrackedMessageIsPoisonedOrCancelled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("tracked-ends", nil)
	store := q.PayloadStore()
	pub, l := trackSetup(t, q, func(context.Context, *azdispatch.Message[string]) error {
		return azdispatch.Permanent(errors.New("no such order"))
	})
	poisoned, err := pub.SendWith(ctx, "x", &azdispatch.SendOptions{Track: true})
	require.NoError(t, err)
	later, err := pub.SendWith(ctx, "y", &azdispatch.SendOptions{Track: true, Delay: time.Hour})
	require.NoError(t, err)
	require.NoError(t, pub.Cancel(ctx, later.Token))

	runUntil(t, l, func(st azdispatch.State) bool { return st.Poisoned == 1 })
	st, err := store.MessageStatus(ctx, poisoned.StatusToken)
	require.NoError(t, err)
	assert.Equal(t, "poisoned", st.State)
	assert.Contains(t, st.Reason, "no such order")
	st, err = store.MessageStatus(ctx, later.StatusToken)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", st.State)
	assert.True(t, st.Final)

	_, err = store.MessageStatus(ctx, "0123456789abcdef0123456789abcdef")
	assert.ErrorIs(t, err, azdispatch.ErrStatusNotFound)
	_, err = store.MessageStatus(ctx, "../groups/x")
	assert.ErrorIs(t, err, azdispatch.ErrStatusNotFound, "a token that could name another blob is none")
}

// A tracked message's end that cannot be recorded keeps the message: its
// next delivery records it and deletes it, its handler not run again.
// And a send whose first record cannot be written is not made.
func TestATrackedMessagesEndIsRecordedBeforeItsDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q := memqueue.New("tracked-faults", &memqueue.Options{Clock: clock})
	var calls atomic.Int32
	pub, l := trackSetup(t, q, func(context.Context, *azdispatch.Message[string]) error {
		calls.Add(1)
		return nil
	})
	q.FailNext(memqueue.OpBlobWrite, 1, nil)
	_, err := pub.SendWith(ctx, "x", &azdispatch.SendOptions{Track: true})
	require.Error(t, err, "its record refused: not sent")
	depth, err := q.Depth(ctx)
	require.NoError(t, err)
	assert.Zero(t, depth)

	sent, err := pub.SendWith(ctx, "x", &azdispatch.SendOptions{Track: true})
	require.NoError(t, err)
	// The delivered mark's write is refused (only logged), then the end's.
	q.FailNext(memqueue.OpBlobWrite, 2, nil)
	runPastFailedDeletes(t, l, clock, func(st azdispatch.State) bool { return st.Succeeded == 1 })
	assert.EqualValues(t, 1, calls.Load(), "handled once")
	assert.EqualValues(t, 1, l.State().Lost, "kept once, for its end to be recorded")
	st, err := q.PayloadStore().MessageStatus(ctx, sent.StatusToken)
	require.NoError(t, err)
	assert.Equal(t, "succeeded", st.State)
}

// A poisoned tracked message whose end is refused is recorded poisoned on
// its next delivery with the reason it was poisoned for, not without one.
func TestAPoisonedTrackedMessagesReasonOutlivesARefusedEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q := memqueue.New("tracked-poison-faults", &memqueue.Options{Clock: clock})
	var calls atomic.Int32
	pub, l := trackSetup(t, q, func(context.Context, *azdispatch.Message[string]) error {
		calls.Add(1)
		return azdispatch.Permanent(errors.New("no such customer"))
	})
	sent, err := pub.SendWith(ctx, "x", &azdispatch.SendOptions{Track: true})
	require.NoError(t, err)
	// The delivered mark's write is refused (only logged), then the end's.
	q.FailNext(memqueue.OpBlobWrite, 2, nil)
	runPastFailedDeletes(t, l, clock, func(st azdispatch.State) bool { return st.Poisoned == 1 })
	assert.EqualValues(t, 1, calls.Load(), "handled once")
	assert.EqualValues(t, 1, l.State().Lost, "kept once, for its end to be recorded")
	st, err := q.PayloadStore().MessageStatus(ctx, sent.StatusToken)
	require.NoError(t, err)
	assert.Equal(t, "poisoned", st.State)
	assert.Contains(t, st.Reason, "no such customer")
}

// Tracking needs a Publisher and one message: a Target's Send and a batch
// refuse it.
func TestTrackingIsRefusedWhereItCannotBeKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("tracked-refused", nil)
	_, err := q.Send(ctx, "x", &azdispatch.SendOptions{Track: true})
	var cfg *azdispatch.ConfigError
	require.ErrorAs(t, err, &cfg)
	assert.Equal(t, "SendOptions.Track", cfg.Field)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	_, err = pub.SendBatch(ctx, []string{"a"}, &azdispatch.SendOptions{Track: true})
	require.ErrorAs(t, err, &cfg)
	assert.Equal(t, "SendOptions.Track", cfg.Field)
}

// A cancel that cancels a tracked message but cannot record its status
// says so; tried again, it says ErrAlreadyCancelled and records it.
func TestACancelThatCannotRecordItsStatusSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var armed atomic.Bool
	var writes atomic.Int32
	q := memqueue.New("tracked-cancel", &memqueue.Options{Intercept: func(_ context.Context, _ string, op azdispatch.Op) error {
		if armed.Load() && op == memqueue.OpBlobWrite && writes.Add(1) == 3 {
			return errors.New("503 ServerBusy")
		}
		return nil
	}})
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	sent, err := pub.SendWith(ctx, "x", &azdispatch.SendOptions{Track: true, Delay: time.Hour})
	require.NoError(t, err)
	armed.Store(true) // the cancel record, its final state, then the status: refused
	err = pub.Cancel(ctx, sent.Token)
	require.ErrorContains(t, err, "cancelled, but its status could not be recorded")
	st, err := q.PayloadStore().MessageStatus(ctx, sent.StatusToken)
	require.NoError(t, err)
	assert.Equal(t, "pending", st.State)
	assert.ErrorIs(t, pub.Cancel(ctx, sent.Token), azdispatch.ErrAlreadyCancelled)
	st, err = q.PayloadStore().MessageStatus(ctx, sent.StatusToken)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", st.State)
}
