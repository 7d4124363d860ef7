package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/azdispatch/azdispatch/internal/azurite"
	"net/http"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// The corners of the listener's promises beyond at-least-once, each found
// by a small program from outside: capacity given back when a dequeuer
// retires, a receive that fails after bringing messages, retries and
// reappearing messages of a push-only listener, a success remembered while
// its delete is still being tried. Each runs over memqueue.

// gate holds handlers until it is opened.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// wait blocks until the gate opens or ctx ends.
func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// running runs l until the test ends, and returns a stop that ends Run and
// returns its error.
func running[T any](t *testing.T, l *azdispatch.Listener[T]) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				err = errors.New("Run did not return within a minute")
			}
		})
		return err
	}
	t.Cleanup(func() { assert.NoError(t, stop()) })
	return stop
}

// A dequeuer that retires while its messages are still being handled
// leaves their capacity counted: a dequeuer started later does not take
// more than MaxDequeuers × Concurrency messages into the listener's hands.
// (It used to start with a full set of its own, and ten idle and wake-up
// cycles held five times the bound hidden.)
func TestRetiredDequeuersLeaveTheirCapacityCounted(t *testing.T) {
	t.Parallel()
	q := memqueue.New("corner-capacity", nil)
	g := newGate()
	var peak atomic.Int64
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[int]) error {
		return g.wait(ctx)
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			PushOnly:     true,
			Wake:         q,
			MaxDequeuers: 2,
			Idle:         azdispatch.ExponentialIdle(0, 20*time.Millisecond),
			// Short enough that a scaled-up dequeuer may retire at once.
			ScaleInterval: time.Millisecond,
		},
		Concurrency: 2,
	})
	require.NoError(t, err)
	const bound = 2 * 2
	stop := running(t, l)
	ctx := context.Background()
	for cycle := range 10 {
		// One message at a time: a dequeuer takes it with a slot to spare,
		// finds nothing more, and retires while the message is in hand.
		_, err := q.Send(ctx, fmt.Sprint(cycle), nil) // the send wakes the listener
		require.NoError(t, err)
		// Let the dequeuers take it and retire. Once the capacity is in
		// use, nothing more is received: a cycle then ends at its deadline.
		deadline := time.Now().Add(300 * time.Millisecond)
		for time.Now().Before(deadline) {
			s := l.State()
			peak.Store(max(peak.Load(), int64(s.InFlight)))
			if s.Received > int64(cycle) && s.ActiveDequeuers == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		s := l.State()
		peak.Store(max(peak.Load(), int64(s.InFlight)))
		t.Logf("cycle %d: received %d, in flight %d, dequeuers %d, scale-downs %d", cycle, s.Received, s.InFlight, s.ActiveDequeuers, s.ScaleDowns)
	}
	assert.LessOrEqual(t, peak.Load(), int64(bound), "messages in hand at once, with MaxDequeuers × Concurrency = %d", bound)
	assert.LessOrEqual(t, l.State().Received, int64(bound), "nothing received beyond the capacity while every handler waits")
	g.open()
	waitUntil(t, "all 10 handled", func() bool { return l.State().Succeeded == 10 })
	require.NoError(t, stop())
}

// receiveThenFail is a storage middleware whose receives fail after
// bringing messages, as its contract allows: a middleware may return an
// error of its own after Next.
type receiveThenFail struct{ left atomic.Int64 }

func (r *receiveThenFail) HandleCall(ctx context.Context, c *azdispatch.Call) error {
	return c.Next(ctx)
}

func (r *receiveThenFail) HandleStorage(ctx context.Context, op *azdispatch.StorageOp) error {
	err := op.Next(ctx)
	if op.Kind == azdispatch.OpReceive && len(op.Received) > 0 && r.left.Add(-1) >= 0 {
		return errors.New("the receive's response came with an error")
	}
	return err
}

// A receive that returns messages and an error does not lose them: they
// are handled as received (the error is counted and backed off from), and
// the listener goes on receiving. (It used to drop them with their
// capacity, which stopped the listener for good, silently.)
func TestAReceiveThatFailsAfterBringingMessagesLosesNone(t *testing.T) {
	t.Parallel()
	q := memqueue.New("corner-receive-error", nil)
	ctx := context.Background()
	for n := range 5 {
		_, err := q.Send(ctx, fmt.Sprint(n), nil)
		require.NoError(t, err)
	}
	mw := &receiveThenFail{}
	mw.left.Store(2)
	var handled atomic.Int64
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[int]) error {
		handled.Add(1)
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			BatchSize:    2,
			MaxDequeuers: 1,
			Idle:         azdispatch.ExponentialIdle(0, 50*time.Millisecond),
		},
		Concurrency: 2,
		Middleware:  []azdispatch.Middleware{mw},
	})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "all 5 handled", func() bool { return l.State().Succeeded == 5 })
	require.NoError(t, stop())
	s := l.State()
	assert.EqualValues(t, 5, handled.Load())
	assert.EqualValues(t, 2, s.ReceiveErrors, "each receive that came with an error is counted")
	assert.EqualValues(t, 5, s.Received)
}

// A push-only listener comes back for a message it released for a retry,
// though no send wakes it: it knows when the message is due. (Its last
// dequeuer used to retire without looking, and the retry waited for the
// next unrelated send.)
func TestPushOnlyListenerComesBackForARetry(t *testing.T) {
	t.Parallel()
	q := memqueue.New("corner-pushonly-retry", nil)
	var calls atomic.Int64
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[int]) error {
		if calls.Add(1) == 1 {
			return errors.New("not yet")
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			PushOnly: true,
			Wake:     q,
			Idle:     azdispatch.ExponentialIdle(0, 20*time.Millisecond),
		},
		Retry: func(int64) time.Duration { return time.Second },
	})
	require.NoError(t, err)
	stop := running(t, l)
	_, err = q.Send(context.Background(), "1", nil)
	require.NoError(t, err)
	waitUntil(t, "the first try failed and every dequeuer retired", func() bool {
		s := l.State()
		return s.Retried == 1 && s.ActiveDequeuers == 0
	})
	waitUntil(t, "the retry, with no wake-up from a send", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	assert.EqualValues(t, 2, calls.Load())
}

// A push-only listener also comes back for a message that reappears after
// its delete failed: its visibility timeout says when. It comes back when
// the message is surely visible again: the service counts whole seconds,
// and hides a message from some moment during the request that received
// it. (A dequeuer started a moment too early, at a time counted from
// before the receive, found the queue empty, took it for drained and
// stopped; the message then waited for the next unrelated send.)
func TestPushOnlyListenerComesBackForAMessageWhoseDeleteFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		visibility time.Duration
		latency    time.Duration // of the first receive
	}{
		{"1s", time.Second, 0},
		{"1.5s, which the service counts as 2s", 1500 * time.Millisecond, 0},
		{"1s, and a receive that takes 50ms", time.Second, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var slowed atomic.Bool
			q := memqueue.New("corner-pushonly-delete", &memqueue.Options{
				Intercept: func(_ context.Context, _ string, op azdispatch.Op) error {
					if op == azdispatch.OpReceive && tc.latency > 0 && slowed.CompareAndSwap(false, true) {
						time.Sleep(tc.latency)
					}
					return nil
				},
			})
			q.FailNext(azdispatch.OpDelete, 1, nil)
			var calls atomic.Int64
			l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[int]) error {
				calls.Add(1)
				return nil
			}, &azdispatch.ListenerOptions{
				Scaling: azdispatch.ScalingOptions{
					PushOnly: true,
					Wake:     q,
					// Every dequeuer stops at its first empty receive.
					Idle: func(azdispatch.State, int) (time.Duration, bool) { return 0, true },
				},
				VisibilityTimeout: tc.visibility,
			})
			require.NoError(t, err)
			stop := running(t, l)
			_, err = q.Send(context.Background(), "1", nil)
			require.NoError(t, err)
			waitUntil(t, "the delete failed and every dequeuer retired", func() bool {
				s := l.State()
				return s.Lost == 1 && s.ActiveDequeuers == 0
			})
			waitUntil(t, "the message deleted when it reappeared", func() bool { return l.State().Succeeded == 1 })
			require.NoError(t, stop())
			assert.EqualValues(t, 1, calls.Load(), "handled once: its reappearance was only deleted")
			assert.EqualValues(t, 1, l.State().HandledBefore)
		})
	}
}

// A push-only listener over a sharded queue comes back for a retry on
// whichever shard it is: a receive made for messages known to be due asks
// every shard, though the one that holds it was found empty a moment ago
// (and would otherwise be passed over for EmptySkip), or says when a shard
// it could not ask may be asked.
func TestPushOnlyListenerOverShardsComesBackForARetry(t *testing.T) {
	t.Parallel()
	shards := make([]azdispatch.Shard, 4)
	for i := range shards {
		shards[i] = memqueue.New(fmt.Sprintf("corner-pushonly-shards-%d", i), nil)
	}
	sq, err := azdispatch.NewShardedQueue("corner-pushonly-shards", shards, &azdispatch.ShardedQueueOptions{EmptySkip: time.Hour})
	require.NoError(t, err)
	var calls atomic.Int64
	l, err := azdispatch.NewListener(sq, func(_ context.Context, m *azdispatch.Message[int]) error {
		if calls.Add(1) <= 3 {
			return errors.New("not yet")
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			PushOnly: true,
			Wake:     sq,
			Idle:     func(azdispatch.State, int) (time.Duration, bool) { return 0, true },
		},
		Retry: func(int64) time.Duration { return time.Second },
	})
	require.NoError(t, err)
	stop := running(t, l)
	_, err = sq.Send(context.Background(), "1", nil)
	require.NoError(t, err)
	waitUntil(t, "three failed tries, then the retry, with no wake-up from a send", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	assert.EqualValues(t, 4, calls.Load())
}

// A push-only listener over a sharded queue comes back for a message that
// the lost answer of one shard's receive hid, though another shard
// answered, so that the sharded queue's receive succeeded: it tells the
// listener that a shard failed, and the listener looks again when what that
// shard hid reappears. (The failure went unseen: the listener took the
// receive for an empty one, its dequeuer stopped, and the message waited
// for the next unrelated send.)
func TestPushOnlyListenerOverShardsComesBackAfterAShardsLostReceive(t *testing.T) {
	t.Parallel()
	lossy := memqueue.New("corner-pushonly-shard-lost-0", nil)
	shards := []azdispatch.Shard{lossy, memqueue.New("corner-pushonly-shard-lost-1", nil)}
	sq, err := azdispatch.NewShardedQueue("corner-pushonly-shard-lost", shards, nil)
	require.NoError(t, err)
	_, err = lossy.Send(context.Background(), "1", nil)
	require.NoError(t, err)
	lossy.LoseNext(azdispatch.OpReceive, 1)
	var calls atomic.Int64
	l, err := azdispatch.NewListener(sq, func(context.Context, *azdispatch.Message[int]) error {
		calls.Add(1)
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			PushOnly: true,
			Wake:     noWakeUps{},
			// Every dequeuer stops at its first empty receive.
			Idle: func(azdispatch.State, int) (time.Duration, bool) { return 0, true },
		},
		VisibilityTimeout: time.Second,
	})
	require.NoError(t, err)
	stop := running(t, l)
	// Not "retired and none active": on a loaded machine the comeback may
	// start at once (the lost receive itself took most of the timeout),
	// so that state can last too short a while to be seen.
	waitUntil(t, "the lost receive, and a dequeuer retired", func() bool { return l.State().ScaleDowns >= 1 })
	waitUntil(t, "handled once it reappeared, with no send or wake-up", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	assert.EqualValues(t, 1, calls.Load())
	assert.Zero(t, l.State().ReceiveErrors, "the sharded queue's receive succeeded: the other shard answered")
}

// A push-only listener comes back for a message that a request whose
// answer was lost may have hidden for longer: a renewal (the next one then
// finds the receipt stale, and the handler is told its ownership is lost),
// or a release for a retry longer than the visibility timeout. It looks
// when the message reappears if the request failed, and again when it
// reappears if the request took effect. (It used to look only at the
// first, find nothing, stop, and leave the message waiting for the next
// unrelated send.)
func TestPushOnlyListenerComesBackAfterALostRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts azdispatch.ListenerOptions
		// first is the first call's handler: it loses the answer of the
		// listener's next update and returns.
		first func(context.Context, *memqueue.Queue) error
	}{
		{"renewal", azdispatch.ListenerOptions{VisibilityTimeout: 4 * time.Second},
			func(ctx context.Context, q *memqueue.Queue) error {
				q.LoseNext(azdispatch.OpUpdate, 1) // the first renewal, at 2 s
				<-ctx.Done()                       // the next finds the receipt stale
				return context.Cause(ctx)
			}},
		{"release", azdispatch.ListenerOptions{VisibilityTimeout: 2 * time.Second, Retry: func(int64) time.Duration { return 5 * time.Second }},
			func(ctx context.Context, q *memqueue.Queue) error {
				q.LoseNext(azdispatch.OpUpdate, 1) // the release for the 5 s retry
				return errors.New("not yet")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := memqueue.New("corner-pushonly-lost-"+tc.name, nil)
			var calls atomic.Int64
			var firstErr atomic.Pointer[error]
			opts := tc.opts
			opts.Scaling.PushOnly, opts.Scaling.Wake = true, noWakeUps{}
			opts.Scaling.Idle = func(azdispatch.State, int) (time.Duration, bool) { return 0, true }
			l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[int]) error {
				if calls.Add(1) == 1 {
					err := tc.first(ctx, q)
					firstErr.Store(&err)
					return err
				}
				return nil
			}, &opts)
			require.NoError(t, err)
			stop := running(t, l)
			_, err = q.Send(context.Background(), "1", nil)
			require.NoError(t, err)
			l.Notify()
			waitUntil(t, "handled on its second delivery, with no send or wake-up", func() bool { return l.State().Succeeded == 1 })
			require.NoError(t, stop())
			assert.EqualValues(t, 2, calls.Load())
			if tc.name == "renewal" {
				assert.ErrorIs(t, *firstErr.Load(), azdispatch.ErrOwnershipLost, "the first call was told")
			}
		})
	}
}

// A renewal that keeps failing is tried again while the message is still
// hidden; once its visibility timeout has run out, the handler's context
// ends with ErrOwnershipLost, as the docs promise when another receiver
// may have the message. (The renewer used to stop after a single failure
// with under a second left, and the handler ran on, unaware.)
func TestFailingRenewalsEndTheHandlersContextWhenTheMessageReappears(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	var renewals atomic.Int64
	q := memqueue.New("corner-failing-renewals", &memqueue.Options{
		Intercept: func(_ context.Context, queue string, op azdispatch.Op) error {
			if op != azdispatch.OpUpdate || !failing.Load() {
				return nil
			}
			renewals.Add(1)
			return &azdispatch.StorageError{Op: op, Queue: queue, StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy",
				Err: errors.New("throttled")}
		},
	})
	_, err := q.Send(context.Background(), "1", nil)
	require.NoError(t, err)
	var cause atomic.Pointer[error]
	var calls atomic.Int64
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[int]) error {
		if calls.Add(1) > 1 {
			return nil
		}
		failing.Store(true) // every renewal fails with 503
		<-ctx.Done()
		err := context.Cause(ctx)
		cause.Store(&err)
		failing.Store(false)
		return err
	}, &azdispatch.ListenerOptions{VisibilityTimeout: 2 * time.Second, Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 100*time.Millisecond)}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "the first call's context ended", func() bool { return cause.Load() != nil })
	assert.ErrorIs(t, *cause.Load(), azdispatch.ErrOwnershipLost)
	assert.GreaterOrEqual(t, renewals.Load(), int64(3), "renewals tried again while there was time")
	waitUntil(t, "handled on its next delivery", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
}

// A handler that ends its goroutine with runtime.Goexit (as testing's
// FailNow does) instead of returning counts as a failed call: its message
// is released for a retry, its slot given back, and State adds up. (The
// message used to stay in hand, renewed for as long as the listener ran.)
func TestAHandlerThatCallsGoexitFailsItsCall(t *testing.T) {
	t.Parallel()
	q := memqueue.New("corner-goexit", nil)
	_, err := q.Send(context.Background(), "1", nil)
	require.NoError(t, err)
	var calls atomic.Int64
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[int]) error {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			MaxDequeuers: 1,
			Idle:         azdispatch.ExponentialIdle(0, 50*time.Millisecond),
		},
		Concurrency: 1,
		Retry:       func(int64) time.Duration { return 0 },
	})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "handled on its second delivery", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	s := l.State()
	assert.EqualValues(t, 1, s.Failed)
	assert.EqualValues(t, 1, s.Retried)
	assert.Zero(t, s.InFlight)
	assert.Equal(t, s.Received, s.Succeeded+s.Retried+s.Poisoned+s.Lost+s.Released, "%+v", s)
}

// A storm of wake-ups on an empty queue costs at most one receive per
// 20 ms, not one each: every receive is billable. (A loop calling Notify
// once cost tens of thousands of receives a second.)
func TestAStormOfWakeUpsCostsFewReceives(t *testing.T) {
	t.Parallel()
	q := memqueue.New("corner-wake-storm", nil)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[int]) error { return nil },
		&azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "the first receive", func() bool { return l.State().EmptyReceives > 0 })
	before := q.Transactions().Receive
	const storm = time.Second
	for end := time.Now().Add(storm); time.Now().Before(end); {
		l.Notify()
		runtime.Gosched()
	}
	receives := q.Transactions().Receive - before
	require.NoError(t, stop())
	t.Logf("%d receives in a %v storm of wake-ups", receives, storm)
	// One per 20 ms is 50; the bound leaves room for a loaded machine.
	assert.LessOrEqual(t, receives, int64(100))
	assert.Positive(t, receives, "wake-ups are not ignored")
}

// A message released for a retry sends one idle dequeuer to look for it
// when it is due, not all of them: each receive is billable, and all but
// one would come back empty. (Eight idle dequeuers once made eight receives
// for every retry, and a quickstart run twice the receives it needed.)
func TestARetryWakesOneIdleDequeuerNotAll(t *testing.T) {
	t.Parallel()
	q := memqueue.New("corner-retry-one-waiter", nil)
	const n = 10
	for i := range n {
		_, err := q.Send(context.Background(), fmt.Sprint(i), nil)
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[int]) error {
		if m.DequeueCount == 1 {
			// Failures 150 ms apart: each retry is due at a time of its own.
			time.Sleep(time.Duration(m.Body) * 150 * time.Millisecond)
			return errors.New("not yet")
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			// eight dequeuers, all idle between retries
			MinDequeuers: 8,
			MaxDequeuers: 8,
			BatchSize:    1,
			Idle:         func(azdispatch.State, int) (time.Duration, bool) { return 10 * time.Second, false },
		},
		Retry: func(int64) time.Duration { return time.Second },
	})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "every message handled on its retry", func() bool { return l.State().Succeeded == n })
	require.NoError(t, stop())
	s := l.State()
	t.Logf("%d messages retried once: %d receives, %d of them empty", n, s.Transactions.Receive, s.EmptyReceives)
	// About one look per due time (10), and the dequeuers' own idle
	// receives, 8 at the start; every idle dequeuer for each was 36.
	assert.Less(t, s.EmptyReceives, int64(25))
}

// slowFailingDeletes makes every delete until `until` take `took`, as a
// delete the SDK retries against a throttled account does, and then fail
// with 503 ServerBusy.
func slowFailingDeletes(until time.Time, took time.Duration) func(context.Context, string, azdispatch.Op) error {
	return func(ctx context.Context, queue string, op azdispatch.Op) error {
		if op != azdispatch.OpDelete || !time.Now().Before(until) {
			return nil
		}
		time.Sleep(took)
		return &azdispatch.StorageError{Op: op, Queue: queue, StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy",
			Err: errors.New("throttled")}
	}
}

// Deletes that fail for 20 s at a 2 s visibility timeout: every message
// reappears several times while its delete is still being tried, and its
// handler runs once. The listener remembers a success when the handler
// returns, not once its delete has finally failed. (The same run used to
// call the handler again for most messages.)
func TestDeletesFailingForTwentySecondsRunEachHandlerOnce(t *testing.T) {
	azurite.SkipUnlessLong(t)
	if testing.Short() {
		t.Skip("runs for 20 s of failing deletes; memqueue only, no emulator")
	}
	t.Parallel()
	const n = 100
	const failFor = 20 * time.Second
	q := memqueue.New("corner-failing-deletes", &memqueue.Options{
		Intercept: slowFailingDeletes(time.Now().Add(failFor), 3*time.Second),
	})
	ctx := context.Background()
	for i := range n {
		_, err := q.Send(ctx, fmt.Sprint(i), nil)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	calls := map[int]int{}
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[int]) error {
		mu.Lock()
		calls[m.Body]++
		mu.Unlock()
		return nil
	}, &azdispatch.ListenerOptions{
		VisibilityTimeout: 2 * time.Second,
		MaxDequeueCount:   3,
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, 200*time.Millisecond),
		},
	})
	require.NoError(t, err)
	stop := running(t, l)
	deadline := time.Now().Add(failFor + time.Minute)
	for l.State().Succeeded < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, stop())
	s := l.State()
	mu.Lock()
	defer mu.Unlock()
	extra := 0
	for i := range n {
		assert.GreaterOrEqual(t, calls[i], 1, "message %d handled", i)
		extra += max(calls[i]-1, 0)
	}
	t.Logf("%d messages, %d handler calls beyond one each; %d deliveries lost to failed deletes, %d deleted as handled before",
		n, extra, s.Lost, s.HandledBefore)
	assert.Zero(t, extra, "handler calls beyond one per message")
	assert.EqualValues(t, n, s.Succeeded)
	assert.Zero(t, s.Poisoned, "a message that only failed to be deleted is never poisoned")
	assert.Positive(t, s.HandledBefore, "messages came back while their deletes failed")
}

// A handler that succeeds after its renewal found the receipt stale is
// remembered too: the message, back on the queue, is only deleted when
// this listener receives it again.
func TestASuccessAfterOwnershipWasLostIsRemembered(t *testing.T) {
	t.Parallel()
	var staleOnce atomic.Bool
	q := memqueue.New("corner-lost-success", &memqueue.Options{
		Intercept: func(_ context.Context, queue string, op azdispatch.Op) error {
			if op == azdispatch.OpUpdate && staleOnce.CompareAndSwap(false, true) {
				return &azdispatch.StorageError{Op: op, Queue: queue, StatusCode: http.StatusNotFound, Code: "MessageNotFound",
					Err: errors.New("the pop receipt is stale")}
			}
			return nil
		},
	})
	_, err := q.Send(context.Background(), "1", nil)
	require.NoError(t, err)
	var calls atomic.Int64
	l, err := azdispatch.NewListener(q, func(ctx context.Context, _ *azdispatch.Message[int]) error {
		if calls.Add(1) == 1 {
			// Past the first renewal, at half of the 2 s visibility
			// timeout, which finds the receipt stale; done before the
			// message reappears.
			time.Sleep(1500 * time.Millisecond)
		}
		return nil
	}, &azdispatch.ListenerOptions{VisibilityTimeout: 2 * time.Second, Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 100*time.Millisecond)}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "the message deleted", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	s := l.State()
	assert.EqualValues(t, 1, calls.Load(), "the handler ran once")
	assert.EqualValues(t, 1, s.Lost, "the first delivery was settled as lost")
	assert.EqualValues(t, 1, s.HandledBefore, "the second was only deleted")
}

// Requeue sends a message back with the lifetime it was sent with: one
// sent never to expire does not expire a week after its requeue.
func TestRequeueKeepsAMessageThatNeverExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("corner-requeue-ttl", nil)
	_, err := q.Send(ctx, "1", &azdispatch.SendOptions{TTL: -1})
	require.NoError(t, err)
	_, err = q.Send(ctx, "2", &azdispatch.SendOptions{TTL: time.Hour})
	require.NoError(t, err)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[int]) error {
		return azdispatch.Permanent(errors.New("no"))
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond)}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "both poisoned", func() bool { return l.State().Poisoned == 2 })
	require.NoError(t, stop())

	res, err := azdispatch.Requeue(ctx, q.PoisonQueue(), q, nil)
	require.NoError(t, err)
	require.Equal(t, 2, res.Moved)
	got, err := q.Receive(ctx, azdispatch.MaxBatch, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 2)
	never := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	for _, d := range got {
		switch d.Text {
		case "1":
			assert.Equal(t, never, d.ExpiresAt, "sent never to expire, requeued never to expire")
		case "2":
			assert.WithinDuration(t, d.InsertedAt.Add(time.Hour), d.ExpiresAt, time.Second, "sent to live an hour, requeued to live an hour")
		}
	}
}

// A subset of a sharded queue whose every shard is backed off says when
// the first of its own shards is tried again, not a time from shards
// outside it.
func TestNoHealthyShardOfASubsetSaysWhenItsOwnShardIsTried(t *testing.T) {
	t.Parallel()
	a, b := memqueue.New("corner-subset-0", nil), memqueue.New("corner-subset-1", nil)
	sq, err := azdispatch.NewShardedQueue("corner-subset", []azdispatch.Shard{a, b}, &azdispatch.ShardedQueueOptions{
		RetryMin: time.Minute, RetryMax: time.Minute,
	})
	require.NoError(t, err)
	sub, err := sq.Subset(0, 2) // shard 0 only
	require.NoError(t, err)
	a.FailNext(azdispatch.OpReceive, 1, errors.New("down"))
	_, err = sub.Receive(context.Background(), 1, time.Minute)
	require.Error(t, err)
	_, err = sub.Receive(context.Background(), 1, time.Minute)
	require.ErrorIs(t, err, azdispatch.ErrNoHealthyShard)
	assert.NotContains(t, err.Error(), "in -", "no negative wait: %v", err)
	m := regexp.MustCompile(`tried again in ([0-9][0-9.hms]*)$`).FindStringSubmatch(err.Error())
	require.NotNil(t, m, "says when: %v", err)
	wait, err := time.ParseDuration(m[1])
	require.NoError(t, err)
	// Its own shard's back-off: a minute, less the jitter and the moment
	// since; shard 1, outside the subset, was never backed off.
	assert.Greater(t, wait, 45*time.Second, "the wait of shard 0, the subset's own")
	assert.LessOrEqual(t, wait, time.Minute)
}

// A listener over memqueue counts its requests in State, as it does over
// a Queue.
func TestListenerOverMemqueueCountsItsTransactions(t *testing.T) {
	t.Parallel()
	q := memqueue.New("corner-transactions", nil)
	for n := range 3 {
		_, err := q.Send(context.Background(), fmt.Sprint(n), nil)
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[int]) error { return nil },
		&azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond)}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "all handled, and an empty receive", func() bool { s := l.State(); return s.Succeeded == 3 && s.EmptyReceives > 0 })
	require.NoError(t, stop())
	tx := l.State().Transactions
	assert.EqualValues(t, 3, tx.Delete)
	assert.GreaterOrEqual(t, tx.Receive, int64(2))
	assert.Positive(t, tx.EmptyReceive)
	assert.Equal(t, q.Transactions().Receive, tx.Receive, "the listener made every receive the queue saw")
}

// waitUntil waits up to a minute for cond.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// failingAfterReceive is a shard whose first receive fails after bringing
// its messages, as a Source of one's own may.
type failingAfterReceive struct {
	*memqueue.Queue
	failed atomic.Bool
}

func (f *failingAfterReceive) Receive(ctx context.Context, max int, visibility time.Duration) ([]*azdispatch.Delivery, error) {
	got, err := f.Queue.Receive(ctx, max, visibility)
	if err == nil && len(got) > 0 && f.failed.CompareAndSwap(false, true) {
		return got, errors.New("the shard's answer came with an error")
	}
	return got, err
}

// A sharded queue passes on the messages of a shard that fails after
// bringing them, with the error, and its listener handles them.
func TestAShardThatFailsAfterBringingMessagesLosesNone(t *testing.T) {
	t.Parallel()
	shard := &failingAfterReceive{Queue: memqueue.New("corner-shard-receive-error", nil)}
	sq, err := azdispatch.NewShardedQueue("corner-shard-receive-error", []azdispatch.Shard{shard}, nil)
	require.NoError(t, err)
	for n := range 3 {
		_, err := sq.Send(context.Background(), fmt.Sprint(n), nil)
		require.NoError(t, err)
	}
	var redelivered atomic.Int64
	l, err := azdispatch.NewListener(sq, func(_ context.Context, m *azdispatch.Message[int]) error {
		if m.DequeueCount > 1 {
			redelivered.Add(1)
		}
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond)}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "all 3 handled", func() bool { return l.State().Succeeded == 3 })
	require.NoError(t, stop())
	assert.True(t, shard.failed.Load())
	assert.EqualValues(t, 1, l.State().ReceiveErrors)
	assert.Zero(t, redelivered.Load(), "each handled on its first delivery: none was dropped to come back later")
}

// noWakeUps is a WakeSource that never wakes anyone.
type noWakeUps struct{}

func (noWakeUps) Subscribe(func()) (cancel func()) { return func() {} }
