package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A dequeuer gives the rest of its receive to goroutines of their own after
// a slow call, but not while goroutines of the process wait for a core:
// the call may have been slow for want of one, and more goroutines would
// only wait too (on a busy machine they had piled up by the hundred, each a
// stack for every garbage collection to scan).
func TestASlowCallSpillsOnlyWhenACoreIsFree(t *testing.T) {
	t.Parallel()
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy=%v", busy), func(t *testing.T) {
			t.Parallel()
			q := testQueue(t)
			const n = 16
			sendJobs(t, q, n)
			cfg := quick()
			cfg.Scaling.MaxDequeuers, cfg.Scaling.BatchSize = 1, n
			var in, most atomic.Int64
			l, err := NewListener(q, func(ctx context.Context, _ *Message[job]) error {
				now := in.Add(1)
				defer in.Add(-1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				if busy {
					time.Sleep(2 * time.Millisecond) // slow enough to spill, were a core free
					return nil
				}
				// The first call waits until another runs beside it, which
				// only a spill of the rest of the receive brings about.
				give := time.After(30 * time.Second)
				for most.Load() < 2 {
					select {
					case <-give:
						return errors.New("no call ran beside this one")
					case <-time.After(time.Millisecond):
					}
				}
				return nil
			}, cfg)
			require.NoError(t, err)
			var asked atomic.Int64
			l.cpuBusy = func() bool { asked.Add(1); return busy }
			stop := started(t, l)
			waitFor(t, "all handled", func() bool { return l.State().Succeeded == n })
			require.NoError(t, stop())
			assert.Positive(t, asked.Load(), "the dequeuer asked whether a core was free")
			if busy {
				assert.Equal(t, int64(1), most.Load(), "one call at a time: the dequeuer's own")
			} else {
				assert.GreaterOrEqual(t, most.Load(), int64(2), "the rest ran side by side")
			}
		})
	}
}

// While every core stays taken, the messages behind a handler that blocks
// wait for one no longer than a quarter of their visibility timeout: they
// are not renewed before they start, and had reappeared, been handled by
// another dequeuer, and then been handled again, stale, once the blocked
// call returned.
func TestMessagesBehindABlockedCallStartBeforeTheyReappearWhileCoresAreBusy(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	texts := []string{`{"n":0}`, `{"n":1}`, `{"n":2}`, `{"n":3}`}
	sendTexts(t, q, len(texts), func(i int) string { return texts[i] })
	const vis = 2 * time.Second
	cfg := quick()
	cfg.VisibilityTimeout = vis
	cfg.Scaling.MinDequeuers, cfg.Scaling.MaxDequeuers = 2, 2
	var mu sync.Mutex
	calls := map[int]int{}
	l, err := NewListener(q, func(_ context.Context, m *Message[job]) error {
		if m.Body.N == 0 {
			time.Sleep(vis + 3*time.Second) // blocks past the others' visibility
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		calls[m.Body.N]++
		return nil
	}, cfg)
	require.NoError(t, err)
	l.cpuBusy = func() bool { return true }
	stop := started(t, l)
	waitFor(t, "all handled", func() bool { return l.State().Succeeded == int64(len(texts)) })
	require.NoError(t, stop())
	assert.Equal(t, map[int]int{1: 1, 2: 1, 3: 1}, calls, "each handled once")
	assert.Zero(t, l.State().Lost, "no receipt went stale")
}
