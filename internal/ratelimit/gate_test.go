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

// An ask counts on no turn beyond the limit, and no more than half a
// horizon's worth: at 10 a second with a burst of 1, a horizon and a limit
// of a second, the burst and five more.
func TestTakeCountsOnlyTurnsWithinTheLimit(t *testing.T) {
	g := New(rate.NewLimiter(10, 1), time.Second, time.Second)
	turns, err := g.Take(context.Background(), 32)
	require.NoError(t, err)
	assert.Equal(t, 6, turns.Len())
	start := time.Now()
	turns.Use(6)
	require.Equal(t, 6, turns.Len())
	for i := range turns.Len() {
		assert.False(t, turns.At(i).After(start.Add(time.Second)), "turn %d at %v", i, turns.At(i).Sub(start))
		if i > 0 {
			assert.False(t, turns.At(i).Before(turns.At(i-1)), "turns come in order")
		}
	}
}

// Turns a receive had no message for are never taken from the limiter:
// another gate asking next gets them, and does not wait behind them. Ten
// asks that find nothing leave the limiter as they found it.
func TestTurnsNotUsedAreNotTaken(t *testing.T) {
	limiter := rate.NewLimiter(2, 1)
	a, b := New(limiter, 4*time.Second, 4*time.Second), New(limiter, 4*time.Second, 4*time.Second)
	for range 10 {
		turns, err := a.Take(context.Background(), 32)
		require.NoError(t, err)
		turns.Use(0)
	}
	turns, err := a.Take(context.Background(), 32)
	require.NoError(t, err)
	require.Equal(t, 5, turns.Len()) // the burst, and every half second for two seconds
	turns.Use(1)
	assert.Equal(t, 1, turns.Len())
	other, err := b.Take(context.Background(), 1)
	require.NoError(t, err)
	other.Use(1)
	// Had the four unused turns been taken, its first would be 2.5 s away.
	assert.Less(t, time.Until(other.At(0)), time.Second)
}

// A gate asks again only when its own turns are half a horizon from their
// end, so another gate asking meanwhile books the turns right after them,
// however many the first would take: two gates on one limiter alternate.
func TestGatesSharingALimiterTakeTurns(t *testing.T) {
	limiter := rate.NewLimiter(20, 1)
	const horizon = 200 * time.Millisecond
	greedy, modest := New(limiter, horizon, 2*horizon), New(limiter, horizon, 2*horizon)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			turns, err := greedy.Take(ctx, 32)
			if err != nil {
				return
			}
			turns.Use(turns.Len())
		}
	})
	start := time.Now()
	turns, err := modest.Take(ctx, 1)
	require.NoError(t, err)
	turns.Use(1)
	cancel()
	wg.Wait()
	// The greedy gate holds at most a horizon of turns ahead; the modest
	// one's turn comes after them, not after the greedy one's demand.
	assert.Less(t, turns.At(0).Sub(start), 4*horizon, "the modest gate's first turn")
}

// A limiter that gives no turns, from the start or once changed, fails an
// ask with ErrNoTurns rather than leaving it waiting for ever.
func TestALimiterThatGivesNoTurnsSaysSo(t *testing.T) {
	_, err := New(rate.NewLimiter(10, 0), time.Second, time.Second).Take(context.Background(), 3)
	assert.ErrorIs(t, err, ErrNoTurns)

	limiter := rate.NewLimiter(0, 1)
	g := New(limiter, time.Second, time.Second)
	turns, err := g.Take(context.Background(), 3)
	require.NoError(t, err)
	assert.Equal(t, 1, turns.Len(), "the burst")
	turns.Use(1)
	_, err = g.Take(context.Background(), 3)
	assert.ErrorIs(t, err, ErrNoTurns, "the burst spent at a rate of 0")
}

// A wait for turns looks again at least every second, so that a rate raised
// meanwhile is seen: at one turn an hour, with the turn spent, an ask that
// would wait an hour gets its turn soon after the rate goes up.
func TestARaisedRateIsSeenWithinASecond(t *testing.T) {
	limiter := rate.NewLimiter(rate.Every(time.Hour), 1)
	require.True(t, limiter.Allow())
	g := New(limiter, time.Second, time.Second)
	time.AfterFunc(100*time.Millisecond, func() { limiter.SetLimit(rate.Inf) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	turns, err := g.Take(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, 3, turns.Len())
	turns.Use(0)
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

func TestAnInfiniteLimitCountsEverything(t *testing.T) {
	turns, err := New(rate.NewLimiter(rate.Inf, 0), time.Second, time.Second).Take(context.Background(), 32)
	require.NoError(t, err)
	assert.Equal(t, 32, turns.Len())
	turns.Use(32)
	assert.Equal(t, 32, turns.Len())
}

// Dequeuers of one listener ask in parallel: turns one ask counted and has
// not used yet are not counted again, so two asks before either receive
// returns count on no more than the limit holds. Without a limit, asks
// never wait for each other.
func TestParallelAsksDoNotCountTheSameTurns(t *testing.T) {
	g := New(rate.NewLimiter(10, 1), time.Second, time.Second)
	a, err := g.Take(context.Background(), 32)
	require.NoError(t, err)
	b, err := g.Take(context.Background(), 32)
	require.NoError(t, err)
	assert.LessOrEqual(t, a.Len()+b.Len(), 11, "the burst and ten a second, within a second")
	a.Use(a.Len())
	b.Use(b.Len())
	assert.False(t, b.At(b.Len()-1).After(time.Now().Add(1100*time.Millisecond)), "the last turn is within the limit")

	free := New(rate.NewLimiter(rate.Inf, 0), time.Second, time.Second)
	x, err := free.Take(context.Background(), 32)
	require.NoError(t, err)
	y, err := free.Take(context.Background(), 32) // x's receive still under way
	require.NoError(t, err)
	assert.Equal(t, 64, x.Len()+y.Len())
	x.Use(0)
	y.Use(0)
}
