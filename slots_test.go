package azdispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSlotsTakeWaitsForTheThresholdAndTakesWhatIsFree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSlots(32)
	n, err := s.take(ctx, 16, 32)
	require.NoError(t, err)
	assert.Equal(t, 32, n)

	got := make(chan int)
	go func() {
		n, _ := s.take(ctx, 16, 32)
		got <- n
	}()
	s.give(10)
	select {
	case <-got:
		t.Fatal("took with fewer than the threshold free")
	case <-time.After(50 * time.Millisecond):
	}
	s.give(10)
	assert.Equal(t, 20, <-got, "takes all that is free, up to the batch")
}

func TestSlotsTakeEndsWithItsContext(t *testing.T) {
	t.Parallel()
	s := newSlots(1)
	_, err := s.take(context.Background(), 1, 1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.take(ctx, 1, 1)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestSlotsNeverHandOutMoreThanTheyHave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSlots(8)
	var mu sync.Mutex
	held, peak := 0, 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 200 {
				n, err := s.take(ctx, 2, 4)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				held += n
				peak = max(peak, held)
				mu.Unlock()
				mu.Lock()
				held -= n
				mu.Unlock()
				s.give(n)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, peak, 8)
	n, err := s.take(ctx, 8, 8)
	require.NoError(t, err)
	assert.Equal(t, 8, n, "all slots came back")
}

func TestDueTimesShortenTheIdleWaitOncePerRelease(t *testing.T) {
	t.Parallel()
	var d dueTimes
	now := time.Now()
	assert.Equal(t, 10*time.Second, d.limit(now, 10*time.Second), "nothing due")
	d.add(now.Add(2 * time.Second))
	d.add(now.Add(-time.Second)) // already past
	d.add(now.Add(20 * time.Second))
	assert.Equal(t, 2*time.Second, d.limit(now, 10*time.Second))
	assert.Equal(t, 10*time.Second, d.limit(now, 10*time.Second), "that wake-up was used")
	assert.Equal(t, 5*time.Second, d.limit(now.Add(15*time.Second), 10*time.Second))
	for range maxDue + 10 {
		d.add(now.Add(time.Hour))
	}
	assert.Len(t, d.h, maxDue, "bounded")
}
