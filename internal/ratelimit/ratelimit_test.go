package ratelimit

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimiterSchedule(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name  string
		rate  float64
		at    []time.Duration // when each request asks, from t0
		waits []time.Duration // how long each must wait
	}{
		{
			name:  "one at a time at 10/s: each waits its interval",
			rate:  10,
			at:    []time.Duration{0, 0, 0, 0},
			waits: []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond},
		},
		{
			name:  "a quiet spell earns no more than the burst",
			rate:  10,
			at:    []time.Duration{0, 5 * time.Second, 5 * time.Second},
			waits: []time.Duration{0, 0, 100 * time.Millisecond},
		},
		{
			name: "100/s runs a tenth of a second ahead, then paces",
			rate: 100,
			at:   []time.Duration{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			waits: []time.Duration{0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
				10 * time.Millisecond, 20 * time.Millisecond},
		},
		{
			name:  "requests at the rate never wait",
			rate:  4,
			at:    []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond},
			waits: []time.Duration{0, 0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := New(tt.rate)
			require.NotNil(t, l)
			for i, at := range tt.at {
				now := t0.Add(at)
				assert.Equal(t, tt.waits[i], max(0, l.Reserve(now).Sub(now)-l.tolerance), "request %d", i)
			}
		})
	}
}

// sentIn counts the turns whose requests may go within [from, to).
func sentIn(l *Limiter, dues []time.Time, from, to time.Time) int {
	n := 0
	for _, due := range dues {
		if at := due.Add(-l.tolerance); !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func TestLimiterNeverExceedsItsRate(t *testing.T) {
	t.Parallel()
	const rate = 20_000 // one storage account's target
	burst := rate / 10
	t0 := time.Unix(1_700_000_000, 0)
	second := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	t.Run("a crowd asking at once", func(t *testing.T) {
		t.Parallel()
		l := New(rate)
		var dues []time.Time
		for range 5 * rate {
			dues = append(dues, l.Reserve(t0))
		}
		assert.LessOrEqual(t, sentIn(l, dues, t0, second(1)), rate+burst)
		for s := 1; s < 4; s++ {
			assert.LessOrEqual(t, sentIn(l, dues, second(s), second(s+1)), rate, "second %d", s)
		}
	})

	// Two seconds of requests wait; those due in the first second are
	// cancelled, first to last, and a second's worth of new requests ask
	// at t0+1s. The cancelled turns are not handed out again under the
	// feet of the requests still waiting.
	t.Run("cancellations amid waiting requests", func(t *testing.T) {
		t.Parallel()
		l := New(rate)
		var waiting []time.Time
		for range 2 * rate {
			waiting = append(waiting, l.Reserve(t0))
		}
		for _, due := range waiting[:rate] {
			l.GiveBack(due)
		}
		live := waiting[rate:]
		for range rate {
			live = append(live, l.Reserve(second(1)))
		}
		for s := 1; s < 3; s++ {
			assert.LessOrEqual(t, sentIn(l, live, second(s), second(s+1)), rate, "second %d", s)
		}
	})

	// Cancelled last to first, every turn is given back: the limiter is as
	// if they had never asked.
	t.Run("cancellations of the latest requests", func(t *testing.T) {
		t.Parallel()
		l := New(rate)
		var dues []time.Time
		for range 3 * burst {
			dues = append(dues, l.Reserve(t0))
		}
		for i := len(dues) - 1; i >= burst; i-- {
			l.GiveBack(dues[i])
		}
		assert.Equal(t, dues[burst], l.Reserve(t0), "the first turn given back is the next one out")
	})
}

func TestLimiterClampsExtremeRates(t *testing.T) {
	t.Parallel()
	slow := New(1e-15)
	require.NotNil(t, slow)
	assert.Positive(t, slow.interval, "a very slow rate does not overflow into no limit")
	fast := New(1e30)
	require.NotNil(t, fast)
	assert.Equal(t, time.Nanosecond, fast.interval)
	assert.GreaterOrEqual(t, fast.tolerance, time.Duration(0))
}

func TestLimiterWithoutARateDoesNotLimit(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		l := New(rate)
		assert.Nil(t, l, "rate %v", rate)
		assert.NoError(t, l.Wait(context.Background()), "a nil limiter lets everything through")
	}
}

func TestLimiterWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	l := New(0.1) // a burst of one: the second request waits ten seconds
	require.NotNil(t, l)
	require.NoError(t, l.Wait(context.Background()))
	cause := errors.New("shutting down")
	ended, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	assert.ErrorIs(t, l.Wait(ended), cause, "an ended context takes no turn")
	for range 100 {
		ctx, cancel := context.WithTimeoutCause(context.Background(), time.Millisecond, cause)
		assert.ErrorIs(t, l.Wait(ctx), cause)
		cancel()
	}
	// The hundred cancelled turns were given back: the next request waits
	// for one interval at most, not a hundred.
	now := time.Now()
	assert.LessOrEqual(t, l.Reserve(now).Sub(now), 10*time.Second)
}
