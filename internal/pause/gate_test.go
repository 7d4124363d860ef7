package pause

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeQueue is a queue's pause on a service whose clock is skew ahead of
// the local one, read through a counter.
type fakeQueue struct {
	mu    sync.Mutex
	state State
	skew  time.Duration
	fail  bool
	reads atomic.Int32
}

func (q *fakeQueue) read(context.Context) (Reading, error) {
	q.reads.Add(1)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail {
		return Reading{}, errors.New("503")
	}
	return Reading{State: q.state, ServiceNow: time.Now().Add(q.skew)}, nil
}

func (q *fakeQueue) set(s State) { q.mu.Lock(); q.state = s; q.mu.Unlock() }

func TestAGateReadsOncePerIntervalWhoeverAsks(t *testing.T) {
	q := &fakeQueue{}
	g := New(time.Hour, q.read, time.Now)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { assert.NoError(t, g.Wait(context.Background(), nil)) })
	}
	wg.Wait()
	require.NoError(t, g.Wait(context.Background(), nil))
	assert.EqualValues(t, 1, q.reads.Load())
}

func TestAGateJudgesTheExpiryOnTheServicesClock(t *testing.T) {
	// The service's clock is an hour ahead: a pause until 200 ms from the
	// service's now ends in 200 ms, not in an hour and 200 ms.
	q := &fakeQueue{skew: time.Hour}
	q.set(State{Until: time.Now().Add(time.Hour + 200*time.Millisecond), By: "ops"})
	g := New(time.Hour, q.read, time.Now)
	var told State
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, g.Wait(ctx, func(s State) { told = s }))
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Equal(t, "ops", told.By)
	assert.EqualValues(t, 2, q.reads.Load(), "read once, and once more when the pause ended (it might have been extended)")
	st, on := g.State()
	assert.False(t, on)
	assert.Equal(t, State{}, st)
}

func TestAGateSeesAResumeWithinItsInterval(t *testing.T) {
	q := &fakeQueue{}
	q.set(State{Until: time.Now().Add(time.Hour)})
	g := New(50*time.Millisecond, q.read, time.Now)
	done := make(chan error, 1)
	go func() { done <- g.Wait(context.Background(), nil) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("a paused gate let a receive through")
	default:
	}
	q.set(State{})
	require.NoError(t, <-done)
}

func TestAGateWhoseReadFailsKeepsWhatItKnew(t *testing.T) {
	q := &fakeQueue{}
	q.set(State{Until: time.Now().Add(time.Hour)})
	g := New(30*time.Millisecond, q.read, time.Now)
	g.Saw(Reading{State: q.state, ServiceNow: time.Now()}, time.Now())
	q.mu.Lock()
	q.fail = true
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, g.Wait(ctx, nil), context.DeadlineExceeded, "still paused while the reads fail")
	assert.Greater(t, q.reads.Load(), int32(1))

	// An ended pause is not held up by reads that fail.
	g = New(time.Hour, q.read, time.Now)
	g.Saw(Reading{State: State{Until: time.Now().Add(20 * time.Millisecond)}, ServiceNow: time.Now()}, time.Now())
	require.NoError(t, g.Wait(context.Background(), nil))
}

func TestAPauseEndedWhenReadIsNone(t *testing.T) {
	q := &fakeQueue{}
	q.set(State{Until: time.Now().Add(-time.Minute)})
	g := New(time.Hour, q.read, time.Now)
	for range 3 {
		require.NoError(t, g.Wait(context.Background(), nil))
	}
	assert.EqualValues(t, 1, q.reads.Load(), "a pause that has ended is not read again at every receive")
}

func TestWhileOneReadsTheOthersGoOnByTheLastReading(t *testing.T) {
	hang := make(chan struct{})
	var reads atomic.Int32
	g := New(time.Millisecond, func(ctx context.Context) (Reading, error) {
		reads.Add(1)
		select {
		case <-hang:
		case <-ctx.Done():
		}
		return Reading{}, errors.New("no answer")
	}, time.Now)
	g.Saw(Reading{ServiceNow: time.Now()}, time.Now().Add(-time.Hour)) // not paused, an hour ago
	first := make(chan error, 1)
	go func() { first <- g.Wait(context.Background(), nil) }()
	require.Eventually(t, func() bool { return reads.Load() == 1 }, 10*time.Second, time.Millisecond)
	for range 3 {
		require.NoError(t, g.Wait(context.Background(), nil), "not held by a read that hangs")
	}
	assert.EqualValues(t, 1, reads.Load())
	close(hang)
	require.NoError(t, <-first)
}

func TestAGateReadsNothingForAnEndedContext(t *testing.T) {
	q := &fakeQueue{}
	g := New(time.Hour, q.read, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, g.Wait(ctx, nil), context.Canceled)
	_, on := g.Holds(ctx)
	assert.False(t, on)
	assert.Zero(t, q.reads.Load(), "a read then would be paid for in vain")
}

func TestHoldsNeverWaitsOutAPause(t *testing.T) {
	q := &fakeQueue{}
	q.set(State{Until: time.Now().Add(time.Hour), By: "ops"})
	g := New(time.Hour, q.read, time.Now)
	assert.True(t, g.Stale(), "never read")
	st, on := g.Holds(context.Background())
	assert.True(t, on)
	assert.Equal(t, "ops", st.By)
	assert.False(t, g.Stale())

	// Carried to a new gate for the same queue: no read again.
	next := New(time.Hour, q.read, time.Now)
	next.CarryFrom(g)
	_, on = next.Holds(context.Background())
	assert.True(t, on)
	assert.EqualValues(t, 1, q.reads.Load())
}
