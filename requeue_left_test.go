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
