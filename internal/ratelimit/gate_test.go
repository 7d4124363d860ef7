package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// An ask books no turn beyond the horizon: at 10 a second with a burst of
// 1 and a horizon of half a second, one turn now and one every tenth of a
// second up to half a second from now.
func TestTakeBooksOnlyWithinTheHorizon(t *testing.T) {
	g := New(rate.NewLimiter(10, 1), time.Second, time.Second)
	start := time.Now()
	turns, err := g.Take(context.Background(), 32)
	require.NoError(t, err)
	require.GreaterOrEqual(t, turns.Len(), 5)
	require.LessOrEqual(t, turns.Len(), 6)
	for i := range turns.Len() {
		assert.False(t, turns.At(i).After(start.Add(time.Second)), "turn %d at %v", i, turns.At(i).Sub(start))
		if i > 0 {
			assert.False(t, turns.At(i).Before(turns.At(i-1)), "turns come in order")
		}
	}
}

// Turns a receive had no message for go back to the limiter: another gate
// asking next gets them, and does not wait behind them.
func TestKeepGivesBackWhatWasNotUsed(t *testing.T) {
	limiter := rate.NewLimiter(2, 1)
	a, b := New(limiter, 4*time.Second, 4*time.Second), New(limiter, 4*time.Second, 4*time.Second)
	turns, err := a.Take(context.Background(), 32)
	require.NoError(t, err)
	require.Equal(t, 5, turns.Len()) // now, and every half second for two seconds
	turns.Keep(1)
	assert.Equal(t, 1, turns.Len())
	other, err := b.Take(context.Background(), 1)
	require.NoError(t, err)
	// Without the give-back its first turn would be 2.5 s away.
	assert.Less(t, time.Until(other.At(0)), time.Second)
}

// A gate asks again only when its own turns are half a horizon from their
// end, so another gate asking meanwhile books the turns right after them,
// however many the first would take: two gates on one limiter alternate.
func TestGatesSharingALimiterTakeTurns(t *testing.T) {
	limiter := rate.NewLimiter(20, 1)
	const horizon = 200 * time.Millisecond
	greedy, modest := New(limiter, horizon, horizon), New(limiter, horizon, horizon)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if _, err := greedy.Take(ctx, 32); err != nil {
				return
			}
		}
	})
	start := time.Now()
	turns, err := modest.Take(ctx, 1)
	require.NoError(t, err)
	cancel()
	wg.Wait()
	// The greedy gate holds at most a horizon of turns ahead; the modest
	// one's turn comes after them, not after the greedy one's demand.
	assert.Less(t, turns.At(0).Sub(start), 4*horizon, "the modest gate's first turn")
}

func TestALimiterWithNoBurstGivesNoTurns(t *testing.T) {
	_, err := New(rate.NewLimiter(10, 0), time.Second, time.Second).Take(context.Background(), 3)
	assert.ErrorIs(t, err, ErrNoTurns)
}

func TestTakeEndsWithItsContext(t *testing.T) {
	limiter := rate.NewLimiter(rate.Every(time.Hour), 1)
	require.True(t, limiter.Allow())
	stop := errors.New("stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(20*time.Millisecond, func() { cancel(stop) })
	_, err := New(limiter, time.Second, time.Second).Take(ctx, 1)
	assert.ErrorIs(t, err, stop)
}

func TestAnInfiniteLimitBooksEverythingAtOnce(t *testing.T) {
	turns, err := New(rate.NewLimiter(rate.Inf, 0), time.Second, time.Second).Take(context.Background(), 32)
	require.NoError(t, err)
	assert.Equal(t, 32, turns.Len())
}
