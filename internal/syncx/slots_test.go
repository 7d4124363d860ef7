package syncx

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
	s := NewSlots(32)
	n, err := s.Take(ctx, 16, 32)
	require.NoError(t, err)
	assert.Equal(t, 32, n)

	got := make(chan int)
	go func() {
		n, _ := s.Take(ctx, 16, 32)
		got <- n
	}()
	s.Give(10)
	// Only a chance to go wrong: a slow machine lets this pass, never fail.
	select {
	case <-got:
		t.Fatal("took with fewer than the threshold free")
	case <-time.After(50 * time.Millisecond):
	}
	s.Give(10)
	assert.Equal(t, 20, <-got, "takes all that is free, up to the batch")
}

func TestSlotsTakeEndsWithItsContext(t *testing.T) {
	t.Parallel()
	s := NewSlots(1)
	_, err := s.Take(context.Background(), 1, 1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Take(ctx, 1, 1)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestSlotsNeverHandOutMoreThanTheyHave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewSlots(8)
	var mu sync.Mutex
	held, peak := 0, 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 200 {
				n, err := s.Take(ctx, 2, 4)
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
				s.Give(n)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, peak, 8)
	n, err := s.Take(ctx, 8, 8)
	require.NoError(t, err)
	assert.Equal(t, 8, n, "all slots came back")
}

func TestSlotsTryTakeTakesWhatTakeWouldOrNothing(t *testing.T) {
	t.Parallel()
	s := NewSlots(40)
	n, ok := s.TryTake(16, 32)
	require.True(t, ok)
	assert.Equal(t, 32, n)
	n, ok = s.TryTake(16, 32)
	assert.False(t, ok, "8 free, 16 needed")
	assert.Zero(t, n)
	s.Give(10)
	n, ok = s.TryTake(16, 32)
	require.True(t, ok)
	assert.Equal(t, 18, n, "all that is free, up to the batch")
}
