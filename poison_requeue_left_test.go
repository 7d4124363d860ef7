package azdispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A filtered requeue leaves what it skipped visible again at once, so that
// a purge or a look right after sees it, not an empty poison queue for the
// next 30 s.
func TestARequeueLeavesWhatItSkippedVisible(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New("orders", nil)
	for _, body := range []string{"keep", "move", "not an envelope"} {
		_, err := q.Send(ctx, `"`+body+`"`, nil)
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error {
		return azdispatch.Permanent(errors.New("no"))
	}, nil)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	var run sync.WaitGroup
	run.Go(func() { _ = l.Run(runCtx) })
	require.Eventually(t, func() bool { return l.State().Poisoned == 3 }, time.Minute, 10*time.Millisecond)
	stop()
	run.Wait()
	_, err = q.PoisonQueue().Send(ctx, "hand-written, not an envelope", nil)
	require.NoError(t, err)

	res, err := azdispatch.Requeue(ctx, q.PoisonQueue(), q, &azdispatch.RequeueOptions{
		Filter: func(e *azdispatch.PoisonEnvelope) bool { return e.Body == `"move"` },
	})
	require.NoError(t, err)
	assert.Equal(t, azdispatch.RequeueResult{Moved: 1, Skipped: 2, Invalid: 1}, res)
	left, err := q.PoisonQueue().Receive(ctx, 32, time.Minute)
	require.NoError(t, err)
	assert.Len(t, left, 3, "the skipped and the invalid, visible at once")
}

// slowTarget is a target whose first send takes longer than a requeue's
// hold on the messages it skipped: the clock moves past it.
type slowTarget struct {
	*memqueue.Queue
	clock *memqueue.ManualClock
	once  sync.Once
}

func (s *slowTarget) Send(ctx context.Context, text string, opts *azdispatch.SendOptions) (string, error) {
	s.once.Do(func() { s.clock.Advance(31 * time.Second) })
	return s.Queue.Send(ctx, text, opts)
}

// A requeue that runs past the 30 s it hides skipped messages for receives
// them again, with new receipts: it releases them by the latest, reports no
// error, and they are visible when it returns.
func TestALongRequeueReleasesWhatItSkippedByItsLatestReceipt(t *testing.T) {
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Now())
	q := memqueue.New("orders", &memqueue.Options{Clock: clock})
	for _, reason := range []string{"MOVE", "KEEP"} {
		env := &azdispatch.PoisonEnvelope{Queue: "orders", MessageID: reason, Reason: reason, Body: reason, PoisonedAt: clock.Now()}
		text, err := azdispatch.EncodeEnvelopeForTest(env)
		require.NoError(t, err)
		_, err = q.PoisonQueue().Send(ctx, text, nil)
		require.NoError(t, err)
	}
	res, err := azdispatch.Requeue(ctx, q.PoisonQueue(), &slowTarget{Queue: q, clock: clock}, &azdispatch.RequeueOptions{
		Filter: func(e *azdispatch.PoisonEnvelope) bool { return e.Reason == "MOVE" },
	})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Moved)
	left, err := q.PoisonQueue().Receive(ctx, 32, time.Minute)
	require.NoError(t, err)
	require.Len(t, left, 1, "KEEP, visible at once")
}
