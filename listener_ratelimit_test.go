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

// callLog records the order and times of handler calls across listeners.
type callLog struct {
	mu       sync.Mutex
	who      []string
	at       []time.Time
	inFlight map[string]int // the most messages in hand a listener had at a call
	done     map[string]chan struct{}
	left     map[string]int
}

func newCallLog(backlogs map[string]int) *callLog {
	c := &callLog{inFlight: map[string]int{}, done: map[string]chan struct{}{}, left: map[string]int{}}
	for name, n := range backlogs {
		c.done[name], c.left[name] = make(chan struct{}), n
	}
	return c
}

func (c *callLog) record(name string, l interface{ State() azdispatch.State }) {
	inFlight := l.State().InFlight
	c.mu.Lock()
	defer c.mu.Unlock()
	c.who, c.at = append(c.who, name), append(c.at, time.Now())
	c.inFlight[name] = max(c.inFlight[name], inFlight)
	if c.left[name]--; c.left[name] == 0 {
		close(c.done[name])
	}
}

// Two listeners share a limit; one has ten times the other's backlog. Under
// the old design (a wait inside the handler's time, first come first
// served) the one with the backlog took every turn for as long as it
// lasted, with every waiting message hidden and renewed. Now receives are
// gated: each listener holds only the messages it has turns for soon, both
// get turns within the first second's worth of them, the small backlog is
// served while the large one lasts, and no message waits long enough to be
// renewed.
//
// The test counts turns, not seconds, so that a slow machine cannot fail
// it: "the first second" is the first 20 calls at 20 a second.
func TestRateLimitSharesTurnsByDemandAndRenewsNoWaitingMessage(t *testing.T) {
	t.Parallel()
	const perSecond, small, large = 20, 20, 200
	limiter := rate.NewLimiter(perSecond, 1)
	calls := newCallLog(map[string]int{"large": large, "small": small})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// Renewals would start at half the visibility timeout, 1 s: a message
	// kept hidden waiting for a turn behind the other listener's backlog
	// would be renewed.
	opts := &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{RateLimit: limiter}, VisibilityTimeout: 2 * time.Second, DrainTimeout: 100 * time.Millisecond}
	var listeners []*azdispatch.Listener[int]
	for _, q := range []struct {
		name string
		n    int
	}{{"large", large}, {"small", small}} {
		queue := memqueue.New(q.name, nil)
		for i := range q.n {
			_, err := queue.Send(ctx, fmt.Sprint(i), nil)
			require.NoError(t, err)
		}
		var l *azdispatch.Listener[int]
		l, err := azdispatch.NewListener(queue, func(context.Context, *azdispatch.Message[int]) error {
			calls.record(q.name, l)
			return nil
		}, opts)
		require.NoError(t, err)
		listeners = append(listeners, l)
	}
	var run sync.WaitGroup
	for _, l := range listeners {
		run.Go(func() { assert.NoError(t, l.Run(ctx)) })
	}
	select {
	case <-calls.done["small"]:
	case <-time.After(time.Minute):
		t.Error("the small backlog was not served within a minute")
	}
	stop()
	run.Wait()

	calls.mu.Lock()
	defer calls.mu.Unlock()
	first := map[string]int{}
	for i := len(calls.who) - 1; i >= 0; i-- {
		first[calls.who[i]] = i
	}
	largeBefore := 0
	for _, who := range calls.who {
		if who == "small" {
			continue
		}
		largeBefore++
		if largeBefore+small > len(calls.who) {
			break
		}
	}
	t.Logf("first turns: large at call %d (%v), small at call %d (%v); the small backlog of %d was done after %d calls of the large one; most in hand: %v",
		first["large"], calls.at[first["large"]].Sub(calls.at[0]), first["small"], calls.at[first["small"]].Sub(calls.at[0]),
		small, len(calls.who)-small, calls.inFlight)
	assert.Less(t, first["large"], perSecond, "the large backlog's first turn is within the first second's turns")
	assert.Less(t, first["small"], perSecond, "the small backlog's first turn is within the first second's turns")
	// Both saturated, they take turns about evenly; the bound leaves room
	// for uneven asks on a loaded machine.
	assert.LessOrEqual(t, len(calls.who)-small, 3*small, "the small backlog waited behind the large one")
	for i, l := range listeners {
		st := l.State()
		assert.Zero(t, st.Renewed, "listener %d renewed a message waiting for its turn", i)
		assert.Zero(t, st.Failed, "listener %d", i)
	}
	// Half a second of turns at 20 a second, and the burst: the rest of
	// the backlog stayed in the queue, visible to other workers.
	assert.LessOrEqual(t, calls.inFlight["large"], 16, "messages the large listener held at once")
}

// Two listeners of different types, on two queues, share one limiter: the
// calls of both together start no faster than its rate. Only the upper
// bound is tight (a limiter cannot be beaten by a slow machine, only fallen
// short of); the lower one says the limit is used, with room for a loaded
// machine.
func TestRateLimitIsSharedAcrossListeners(t *testing.T) {
	t.Parallel()
	const limit = 40.0 // calls per second, both listeners together
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	limiter := rate.NewLimiter(limit, 1)
	const perQueue = 60
	var mu sync.Mutex
	var starts []time.Time
	var bothDone sync.WaitGroup
	bothDone.Add(2 * perQueue)
	record := func() {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		bothDone.Done()
	}
	qa, qb := memqueue.New("limited-a", nil), memqueue.New("limited-b", nil)
	for i := range perQueue {
		_, err := qa.Send(ctx, fmt.Sprintf(`{"n":%d}`, i), nil)
		require.NoError(t, err)
		_, err = qb.Send(ctx, fmt.Sprintf("%d", i), nil)
		require.NoError(t, err)
	}
	la, err := azdispatch.NewListener(qa, func(context.Context, *azdispatch.Message[item]) error { record(); return nil },
		&azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{RateLimit: limiter}})
	require.NoError(t, err)
	lb, err := azdispatch.NewListener(qb, func(context.Context, *azdispatch.Message[string]) error { record(); return nil },
		&azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{RateLimit: limiter}})
	require.NoError(t, err)
	var run sync.WaitGroup
	run.Go(func() { assert.NoError(t, la.Run(ctx)) })
	run.Go(func() { assert.NoError(t, lb.Run(ctx)) })
	bothDone.Wait()
	stop()
	run.Wait()

	mu.Lock()
	defer mu.Unlock()
	// From the first call to the last: the burst of 1 is the first, and
	// the other 2×perQueue−1 each wait an interval.
	elapsed := starts[len(starts)-1].Sub(starts[0])
	got := float64(len(starts)-1) / elapsed.Seconds()
	t.Logf("shared limit %.0f/s: both listeners together started %.1f calls/s over %v (%.1f%% of the limit)",
		limit, got, elapsed.Round(time.Millisecond), 100*got/limit)
	assert.LessOrEqual(t, got, limit*1.05, "the listeners together beat the shared limit")
	assert.GreaterOrEqual(t, got, limit*0.25, "far below the limit")
	assert.Zero(t, la.State().Renewed+lb.State().Renewed, "renewals")
}

// A limiter that gives no turns is refused when the listener is made, not
// found out as a listener that never handles anything.
func TestRateLimitWithNoBurstIsRefused(t *testing.T) {
	_, err := azdispatch.NewListener(memqueue.New("q", nil), func(context.Context, *azdispatch.Message[int]) error { return nil },
		&azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{RateLimit: rate.NewLimiter(10, 0)}})
	var ce *azdispatch.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ListenerOptions.Scaling.RateLimit", ce.Field)
}

// A limiter set to give no turns while the listener runs (a rate of 0, to
// pause a consumer, with or without its burst) pauses receiving, with no
// message taken and no busy loop; set back, the listener goes on within
// about a second.
func TestARateLimitSetToZeroPausesReceiving(t *testing.T) {
	t.Parallel()
	for _, burstToo := range []bool{false, true} {
		t.Run(fmt.Sprintf("burst to 0 too: %v", burstToo), func(t *testing.T) {
			limiter := rate.NewLimiter(rate.Inf, 1)
			q := memqueue.New("paused", nil)
			handled := make(chan struct{}, 10)
			l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[int]) error {
				handled <- struct{}{}
				return nil
			}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{RateLimit: limiter}})
			require.NoError(t, err)
			ctx, stop := context.WithCancel(context.Background())
			var run sync.WaitGroup
			run.Go(func() { assert.NoError(t, l.Run(ctx)) })
			defer func() { stop(); run.Wait() }()

			_, err = q.Send(ctx, "1", nil)
			require.NoError(t, err)
			<-handled
			limiter.SetLimit(0)
			if burstToo {
				limiter.SetBurst(0)
			} else {
				// The burst's one token, spent by the first message under
				// the new rate.
				_, err = q.Send(ctx, "2", nil)
				require.NoError(t, err)
				<-handled
			}
			receivesBefore := q.Transactions().Receive
			_, err = q.Send(ctx, "3", nil)
			require.NoError(t, err)
			select {
			case <-handled:
				t.Fatal("handled while the limiter gives no turns")
			case <-time.After(1500 * time.Millisecond):
			}
			// At most the receive under way when the limit changed, and
			// one a second after: not a loop.
			assert.LessOrEqual(t, q.Transactions().Receive-receivesBefore, int64(3))
			limiter.SetLimit(rate.Inf)
			limiter.SetBurst(1)
			select {
			case <-handled:
			case <-time.After(time.Minute):
				t.Fatal("not handled once the limiter gives turns again")
			}
		})
	}
}
