package azdispatch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Against Azurite: a sharded group's children are handled by two
// listeners at once, on one queue of an account; the listener that
// completes the group sends its continuation to another queue of the
// account (the default, with no PayloadOptions.Continue), which a third
// listener handles once. The blob requests stay near one per child.
func TestAGroupCompletesAcrossListenersAgainstAzurite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := testAccount(t, nil)
	children, next := uniqueName(t), uniqueName(t)
	createQueue(t, children)
	createQueue(t, next)
	qc, err := a.Queue(children)
	require.NoError(t, err)
	qn, err := a.Queue(next)
	require.NoError(t, err)
	pubChildren, err := NewPublisher[job](qc, nil)
	require.NoError(t, err)
	pubNext, err := NewPublisher[string](qn, nil)
	require.NoError(t, err)
	store, err := a.PayloadStore("")
	require.NoError(t, err)

	const size = 600 // ten shards
	then, err := ContinueWith(pubNext, "build the index")
	require.NoError(t, err)
	g, err := store.StartGroup(ctx, size, then, &GroupOptions{Rule: ContinueOnFinish})
	require.NoError(t, err)
	for i := range size {
		_, err := pubChildren.SendWith(ctx, job{N: i}, &SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	before := a.Transactions()

	var lastChild atomic.Int64 // Unix nanoseconds of the latest handler's return
	var handled atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var run sync.WaitGroup
	for range 2 {
		l, err := NewListener(qc, func(_ context.Context, m *Message[job]) error {
			if m.Body.N == 13 {
				return Permanent(fmt.Errorf("child %d is broken", m.Body.N))
			}
			handled.Add(1)
			lastChild.Store(time.Now().UnixNano())
			return nil
		}, &ListenerOptions{Scaling: ScalingOptions{Idle: ExponentialIdle(0, 50*time.Millisecond)}})
		require.NoError(t, err)
		run.Go(func() { assert.NoError(t, l.Run(runCtx)) })
	}
	type arrival struct {
		at      time.Time
		outcome *GroupOutcome
	}
	arrived := make(chan arrival, 4)
	ln, err := NewListener(qn, func(_ context.Context, m *Message[string]) error {
		o, ok := GroupOutcomeOf(m.MessageInfo)
		assert.True(t, ok)
		arrived <- arrival{time.Now(), o}
		return nil
	}, &ListenerOptions{Scaling: ScalingOptions{Idle: ExponentialIdle(0, 50*time.Millisecond)}})
	require.NoError(t, err)
	run.Go(func() { assert.NoError(t, ln.Run(runCtx)) })

	var got arrival
	select {
	case got = <-arrived:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no continuation; %d children handled", handled.Load())
	}
	// Nothing more arrives while the children's queue is drained.
	require.Eventually(t, func() bool { d, err := qc.Depth(ctx); return err == nil && d == 0 }, time.Minute, 50*time.Millisecond)
	stop()
	run.Wait()
	assert.Empty(t, arrived, "one continuation")
	assert.Equal(t, g.ID, got.outcome.ID)
	assert.Equal(t, "failed", got.outcome.Outcome)
	assert.Equal(t, size-1, got.outcome.Succeeded)
	assert.Equal(t, 1, got.outcome.Failed)

	after := a.Transactions()
	blob := (after.BlobRead + after.BlobWrite + after.BlobDelete + after.BlobList) - (before.BlobRead + before.BlobWrite + before.BlobDelete + before.BlobList)
	t.Logf("continuation %v after the last child's handler returned; %d blob requests for %d children (%.3f each), once-mark included",
		got.at.Sub(time.Unix(0, lastChild.Load())).Round(time.Millisecond), blob, size, float64(blob)/size)
	assert.LessOrEqual(t, blob, int64(2*size+3), "at most 2 blob requests per child and 3 per group")

	st, err := store.GroupStatus(ctx, g.ID)
	require.NoError(t, err)
	assert.True(t, st.Complete)
	require.Len(t, st.Failures, 1)
	assert.Contains(t, st.Failures[0].Reason, "child 13 is broken")
}
