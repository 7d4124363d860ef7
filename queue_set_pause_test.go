package azdispatch_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// A listener over a set reads nothing from a queue of it that is paused,
// and goes on with the others; once the queue is resumed, it is read again
// within the set's interval (10 s).
func TestAQueueSetSkipsAPausedQueueAndGoesOnWithTheOthers(t *testing.T) {
	t.Parallel()
	r := newSetRig(t, []string{"a", "b"}, nil, &azdispatch.QueueSetOptions{Order: azdispatch.FairShares})
	st, err := r.queues[0].Pause(r.ctx, time.Hour, &azdispatch.PauseOptions{By: "ops"})
	require.NoError(t, err)
	r.fill(0, 20)
	r.fill(1, 20)
	r.listen(r.handler(0, nil), nil)
	a, b := r.queues[0].Name(), r.queues[1].Name()
	waitUntil(t, "b's 20 handled", func() bool { return count(r.calls(), b) == 20 })
	assert.Zero(t, count(r.calls(), a), "a is paused")
	assert.Equal(t, st, r.set.State()[0].Paused, "the set shows a's pause")
	assert.Zero(t, r.set.State()[1].Paused)

	require.NoError(t, r.queues[0].Resume(r.ctx))
	waitUntil(t, "a's 20 handled after the resume", func() bool { return count(r.calls(), a) == 20 })
	assert.Zero(t, r.set.State()[0].Paused)
}

// count is how many of calls are q.
func count(calls []string, q string) int {
	n := 0
	for _, c := range calls {
		if c == q {
			n++
		}
	}
	return n
}
