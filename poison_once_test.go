package azdispatch_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/wire"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A message copied to the poison queue whose delete then fails is not
// poisoned again on its next delivery: the listener only deletes it.
func TestPoisonMoveWhoseDeleteFailsIsNotRepeated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q := memqueue.New("poison-once", &memqueue.Options{Clock: clock})
	_, err := q.Send(ctx, `{"ID":"a"}`, nil)
	require.NoError(t, err)
	q.FailNext(azdispatch.OpDelete, 1, nil) // the delete after the copy

	var calls atomic.Int64
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[struct{ ID string }]) error {
		calls.Add(1)
		return azdispatch.Permanent(assert.AnError)
	}, &azdispatch.ListenerOptions{VisibilityTimeout: time.Second})
	require.NoError(t, err)
	runPastFailedDeletes(t, l, clock, func(s azdispatch.State) bool { return s.Poisoned == 1 })

	s := l.State()
	assert.EqualValues(t, 1, calls.Load(), "the handler ran once")
	assert.EqualValues(t, 1, s.HandledBefore, "the second delivery only finished the move")
	depth, err := q.PoisonQueue().Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, depth, "one envelope")
	depth, err = q.Depth(ctx)
	require.NoError(t, err)
	assert.Zero(t, depth)
}

// Two envelopes of the same message (poisoned twice, by two listeners)
// are requeued once: the second is deleted as a duplicate.
func TestRequeueSkipsADuplicateEnvelope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("requeue-dup", nil)
	poison := q.PoisonQueue()
	envelope := func(id, reason string) string {
		return wire.PoisonMagic + `{"queue":"requeue-dup","id":"` + id + `","dequeue_count":6,"reason":"` + reason + `"}` + "\n" + `{"ID":"` + id + `"}`
	}
	for _, text := range []string{envelope("m1", "first"), envelope("m2", "first"), envelope("m1", "again"), envelope("m3", "first")} {
		_, err := poison.Send(ctx, text, nil)
		require.NoError(t, err)
	}
	res, err := azdispatch.Requeue(ctx, poison, q, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Moved)
	assert.Equal(t, 1, res.Duplicates)
	depth, err := poison.Depth(ctx)
	require.NoError(t, err)
	assert.Zero(t, depth, "the duplicate is gone from the poison queue too")

	got, err := q.Receive(ctx, 32, time.Minute)
	require.NoError(t, err)
	var texts []string
	for _, d := range got {
		// Each carries the ID it had, for an envelope if poisoned again.
		meta, body, err := azdispatch.ParseMetadata(d.Text)
		require.NoError(t, err)
		assert.Contains(t, body, meta[azdispatch.MetadataRequeuedFrom])
		texts = append(texts, body)
	}
	assert.ElementsMatch(t, []string{`{"ID":"m1"}`, `{"ID":"m2"}`, `{"ID":"m3"}`}, texts)
	assert.Equal(t, 1, strings.Count(strings.Join(texts, ","), "m1"))
}
