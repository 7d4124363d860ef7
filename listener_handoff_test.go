package azdispatch_test

import (
	"bytes"
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// idleTryGoroutines counts the goroutines of this process waiting for a
// message to try (the listener's pool of try goroutines), from a dump of
// every goroutine's stack.
func idleTryGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("(*tryPool).await"))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A dequeuer whose handler call is slow hands the rest of its receive and
// its own loop to other goroutines (a spill), and goes on as a try
// goroutine itself. A successor takes an idle try goroutine rather than a
// new one: otherwise every spill left one more goroutine idle, a busy
// listener on a loaded machine (where merely waiting for a core looks like
// a slow call) piled up thousands of them between two retirements, and the
// garbage collector scanned every one of their stacks in each cycle.
//
// Not parallel: it counts every try goroutine of the process.
func TestSpillsReuseIdleTryGoroutines(t *testing.T) {
	b := setup(t)
	const n, concurrency = 12000, 48
	for i := range n {
		_, err := b.pub.Send(b.ctx, "m"+string(rune('a'+i%26)))
		require.NoError(t, err)
	}
	var calls atomic.Int64
	var maxIdle atomic.Int64
	done := make(chan struct{})
	l, err := azdispatch.NewListener(b.queue, func(ctx context.Context, m *azdispatch.Message[string]) error {
		c := calls.Add(1)
		if c%8 == 0 {
			// Longer than a dequeuer waits for progress before it spills,
			// in every receive of up to 32.
			time.Sleep(3 * time.Millisecond)
		}
		if c%100 == 0 {
			if idle := int64(idleTryGoroutines()); idle > maxIdle.Load() {
				maxIdle.Store(idle)
			}
		}
		if c == n {
			close(done)
		}
		return nil
	}, &azdispatch.ListenerOptions{Concurrency: concurrency, Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1, Idle: quickIdle}})
	require.NoError(t, err)
	stop := running(t, l)
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("only %d of %d handled", calls.Load(), n)
	}
	require.NoError(t, stop())
	t.Logf("at most %d try goroutines idle at once", maxIdle.Load())
	// About one spill per receive: hundreds of them. No more try
	// goroutines are ever busy at once than messages are in hand, so no
	// more are idle either, however many spills there were (before, one
	// more stayed idle with each).
	assert.LessOrEqual(t, maxIdle.Load(), int64(concurrency+1), "idle try goroutines at most")
	assert.Equal(t, int64(n), l.State().Succeeded)
}
