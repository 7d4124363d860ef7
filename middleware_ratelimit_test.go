package azdispatch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// Two listeners of different types, on two queues, share one limiter: the
// calls of both together start at the limiter's rate. The rate is measured
// over a window that starts after the first calls (the burst) and logged;
// the test asserts only that it is not above the limit by more than 10%
// (a limiter cannot be beaten by a slow machine, only fallen short of) and
// that it is not below half of it.
func TestRateLimitIsSharedAcrossListeners(t *testing.T) {
	const limit = 40.0 // calls per second, both listeners together
	const window = 3 * time.Second
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	limiter := rate.NewLimiter(limit, 1)

	var mu sync.Mutex
	var starts []time.Time
	record := func() {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
	}
	qa, qb := memqueue.New("limited-a", nil), memqueue.New("limited-b", nil)
	for i := range 150 {
		_, err := qa.Send(ctx, fmt.Sprintf(`{"n":%d}`, i), nil)
		require.NoError(t, err)
		_, err = qb.Send(ctx, fmt.Sprintf("%d", i), nil)
		require.NoError(t, err)
	}
	opts := func() *azdispatch.ListenerOptions {
		// A short drain: the calls still waiting for a turn at the end are
		// released, not waited for. Few handlers each, as the RateLimit doc
		// advises: turns go in the order they are asked for, and a listener
		// with hundreds of calls waiting would book the window ahead of the
		// other.
		return &azdispatch.ListenerOptions{DrainTimeout: 100 * time.Millisecond, MaxDequeuers: 1, Concurrency: 4,
			Middleware: []azdispatch.Middleware{azdispatch.RateLimit(limiter)}}
	}
	la, err := azdispatch.NewListener(qa, func(context.Context, *azdispatch.Message[item]) error { record(); return nil }, opts())
	require.NoError(t, err)
	lb, err := azdispatch.NewListener(qb, func(context.Context, *azdispatch.Message[string]) error { record(); return nil },
		&azdispatch.ListenerOptions{Codec: azdispatch.Raw(), DrainTimeout: 100 * time.Millisecond, MaxDequeuers: 1, Concurrency: 4,
			Middleware: opts().Middleware})
	require.NoError(t, err)
	var run sync.WaitGroup
	run.Go(func() { assert.NoError(t, la.Run(ctx)) })
	run.Go(func() { assert.NoError(t, lb.Run(ctx)) })

	time.Sleep(500 * time.Millisecond) // past the burst and the first receives
	mu.Lock()
	from := time.Now()
	before := len(starts)
	mu.Unlock()
	time.Sleep(window)
	mu.Lock()
	n := len(starts) - before
	elapsed := time.Since(from)
	mu.Unlock()
	stop()
	run.Wait()

	got := float64(n) / elapsed.Seconds()
	a, b := la.State().Succeeded, lb.State().Succeeded
	t.Logf("shared limit %.0f/s: both listeners together started %.1f calls/s over %v (%.1f%% of the limit); succeeded %d + %d",
		limit, got, elapsed.Round(time.Millisecond), 100*got/limit, a, b)
	assert.LessOrEqual(t, got, limit*1.10, "the listeners together beat the shared limit")
	assert.GreaterOrEqual(t, got, limit*0.5, "far below the limit: the limiter is not shared fairly, or the machine is starved")
	assert.Positive(t, a, "listener a got turns")
	assert.Positive(t, b, "listener b got turns")
}
