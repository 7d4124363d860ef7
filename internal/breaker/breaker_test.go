package breaker

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBreakerIsClosedByDefault(t *testing.T) {
	t.Parallel()
	var b Breaker
	open, until := b.Open(time.Now())
	assert.False(t, open)
	assert.True(t, until.IsZero())
	failures, openUntil, lastErr := b.State()
	assert.Zero(t, failures)
	assert.True(t, openUntil.IsZero())
	assert.NoError(t, lastErr)
	assert.False(t, b.Succeed(), "a breaker that never failed was not failing")
}

func TestBreakerFailOpensForAJitteredExponentialWait(t *testing.T) {
	t.Parallel()
	const minWait, maxWait = time.Second, 30 * time.Second
	t0 := time.Unix(1_700_000_000, 0)
	var b Breaker
	for n := int64(1); n <= 10; n++ {
		cause := errors.New("shard down")
		failures, wait := b.Fail(t0, cause, minWait, maxWait)
		require.Equal(t, n, failures)

		nominal := time.Duration(math.Min(float64(minWait)*math.Exp2(float64(n-1)), float64(maxWait)))
		assert.GreaterOrEqual(t, wait, time.Duration(0.8*float64(nominal)), "failure %d", n)
		assert.LessOrEqual(t, wait, time.Duration(1.2*float64(nominal)), "failure %d", n)
		assert.LessOrEqual(t, wait, maxWait, "failure %d: never above the cap", n)

		open, until := b.Open(t0)
		assert.True(t, open, "failure %d", n)
		assert.Equal(t, t0.Add(wait), until, "failure %d", n)
		gotFailures, gotUntil, gotErr := b.State()
		assert.Equal(t, n, gotFailures)
		assert.Equal(t, until, gotUntil)
		assert.Same(t, cause, gotErr)
	}
}

func TestBreakerHalfOpensWhenItsWaitHasPassed(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	var b Breaker
	_, wait := b.Fail(t0, errors.New("x"), time.Second, time.Minute)
	tests := []struct {
		name string
		at   time.Time
		open bool
	}{
		{"at the failure", t0, true},
		{"just before the end", t0.Add(wait - time.Nanosecond), true},
		{"at the end", t0.Add(wait), false},
		{"long after", t0.Add(time.Hour), false},
	}
	for _, tt := range tests {
		open, _ := b.Open(tt.at)
		assert.Equal(t, tt.open, open, tt.name)
	}
	failures, _, _ := b.State()
	assert.EqualValues(t, 1, failures, "half-open still counts the failures")
	failures, _ = b.Fail(t0.Add(wait), errors.New("y"), time.Second, time.Minute)
	assert.EqualValues(t, 2, failures, "a failure when half-open opens it for longer")
}

func TestBreakerSucceedClosesIt(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	var b Breaker
	b.Fail(t0, errors.New("x"), time.Second, time.Minute)
	b.Fail(t0, errors.New("y"), time.Second, time.Minute)
	assert.True(t, b.Succeed(), "it had been failing")
	open, _ := b.Open(t0)
	assert.False(t, open)
	failures, openUntil, lastErr := b.State()
	assert.Zero(t, failures)
	assert.True(t, openUntil.IsZero())
	assert.NoError(t, lastErr)
	assert.False(t, b.Succeed(), "closed already")
}

func TestBreakerIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	var b Breaker
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 500 {
				if i%2 == 0 {
					b.Fail(t0, errors.New("x"), time.Millisecond, time.Second)
				} else {
					b.Succeed()
				}
				b.Open(t0)
				b.State()
			}
		})
	}
	wg.Wait()
	b.Succeed()
	failures, _, _ := b.State()
	assert.Zero(t, failures, "closed after the last Succeed")
}

func TestBreakerHoldExtendsAnOpenBreakerOnly(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	var closed Breaker
	closed.Hold(t0.Add(time.Hour))
	open, _ := closed.Open(t0)
	assert.False(t, open, "a closed breaker is not opened by a hint alone")

	var b Breaker
	_, wait := b.Fail(t0, errors.New("503"), time.Second, time.Second)
	require.LessOrEqual(t, wait, time.Second)
	b.Hold(t0.Add(10 * time.Second))
	open, until := b.Open(t0.Add(5 * time.Second))
	assert.True(t, open, "held past its own back-off")
	assert.Equal(t, t0.Add(10*time.Second), until)
	b.Hold(t0.Add(2 * time.Second))
	_, until = b.Open(t0)
	assert.Equal(t, t0.Add(10*time.Second), until, "a shorter hint does not shorten it")
}

// A half-open breaker admits one trial at a time: the others wait for its
// outcome, or for its hold to lapse if none comes.
func TestAHalfOpenBreakerAdmitsOneTrialAtATime(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	var b Breaker
	assert.True(t, b.Admit(t0, time.Second), "closed: every request")
	assert.True(t, b.Admit(t0, time.Second))
	_, wait := b.Fail(t0, errors.New("x"), time.Second, time.Minute)
	assert.False(t, b.Admit(t0, time.Second), "open")
	half := t0.Add(wait)
	assert.False(t, b.Free(t0), "open")
	assert.True(t, b.Free(half), "half-open, no trial out")
	assert.True(t, b.Admit(half, 3*time.Second), "half-open: the trial")
	assert.False(t, b.Free(half), "the trial is out")
	assert.False(t, b.Admit(half, 3*time.Second), "a second while the trial is out")
	assert.False(t, b.Admit(half.Add(2*time.Second), 3*time.Second))
	assert.True(t, b.Admit(half.Add(3*time.Second), 3*time.Second), "the trial's hold lapsed: another")

	// The trial's failure opens it for longer; its success closes it.
	b.Fail(half.Add(3*time.Second), errors.New("y"), time.Second, time.Minute)
	assert.False(t, b.Admit(half.Add(3*time.Second), time.Second))
	b.Succeed()
	assert.True(t, b.Admit(half.Add(3*time.Second), time.Second))
	assert.True(t, b.Admit(half.Add(3*time.Second), time.Second), "closed again: every request")
}

// Requests in flight together when a shard stops answering all fail at
// once: the first failure counts, and those that started before it do not
// push the back-off further; a request started after it does.
func TestFailuresOfRequestsAlreadyUnderWayCountOnce(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	var b Breaker
	n, _, counted := b.FailStarted(t0, t0.Add(2*time.Second), errors.New("first"), time.Second, time.Minute)
	assert.True(t, counted)
	assert.Equal(t, int64(1), n)
	_, until, _ := b.State()
	for k := range 10 {
		n, _, counted = b.FailStarted(t0, t0.Add(2*time.Second+time.Duration(k)*time.Millisecond), errors.New("same outage"), time.Second, time.Minute)
		assert.False(t, counted)
		assert.Equal(t, int64(1), n)
	}
	_, still, last := b.State()
	assert.Equal(t, until, still, "the back-off is as the first failure set it")
	assert.EqualError(t, last, "same outage", "the last error is kept")
	n, _, counted = b.FailStarted(t0.Add(3*time.Second), t0.Add(5*time.Second), errors.New("a trial"), time.Second, time.Minute)
	assert.True(t, counted, "started after the first failure")
	assert.Equal(t, int64(2), n)
}
