package azdispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// waits records each delivery's dequeue count and time in queue.
type waits struct {
	mu  sync.Mutex
	got []azdispatch.Message[string]
}

func (w *waits) handler(fail func(m *azdispatch.Message[string]) error) azdispatch.Handler[string] {
	return func(_ context.Context, m *azdispatch.Message[string]) error {
		w.mu.Lock()
		w.got = append(w.got, *m)
		w.mu.Unlock()
		if fail != nil {
			return fail(m)
		}
		return nil
	}
}

func (w *waits) all() []azdispatch.Message[string] {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]azdispatch.Message[string](nil), w.got...)
}

// startOfSecond is a manual clock's start: the service keeps times to the
// second, so a wait measured from a whole second is exact.
var startOfSecond = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

// The time in queue a listener reports is the queue clock's wait, exactly:
// from the send to the first receive; on a retry, from the send still
// (earlier tries and the retry delay included), while State.TimeInQueue
// counts the first delivery only.
func TestTimeInQueueIsTheClocksWaitForFirstDeliveriesAndRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(startOfSecond)
	q := memqueue.New("latency-first", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	_, err = pub.Send(ctx, "a")
	require.NoError(t, err)
	clock.Advance(7 * time.Second) // before any listener looks

	var w waits
	l, err := azdispatch.NewListener(q, w.handler(func(m *azdispatch.Message[string]) error {
		if m.DequeueCount == 1 {
			return errors.New("not yet")
		}
		return nil
	}), &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: quickIdle}, Retry: func(int64) time.Duration { return 5 * time.Second }})
	require.NoError(t, err)
	running(t, l)
	waitUntil(t, "the first try failed", func() bool { return l.State().Retried == 1 })
	clock.Advance(8 * time.Second) // visible again after 5 s, received at 8
	waitUntil(t, "the retry succeeded", func() bool { return l.State().Succeeded == 1 })

	got := w.all()
	require.Len(t, got, 2)
	assert.Equal(t, 7*time.Second, got[0].TimeInQueue)
	assert.Equal(t, 15*time.Second, got[1].TimeInQueue, "from the send: the first wait, the try and the retry delay")
	s := l.State()
	assert.Equal(t, int64(1), s.TimeInQueue.Count, "first deliveries only")
	assert.Equal(t, 7*time.Second, s.TimeInQueue.Max)
	assert.Equal(t, 7*time.Second, s.TimeInQueue.P99)
	assert.Equal(t, int64(1), s.RetriedFor.Error)
	assert.Equal(t, int64(2), s.HandlerTime.Count)
}

// A message sent for later waits from its due time, not its insertion:
// a delay the service keeps alone (up to 7 days), a time named with
// SendAt, and a delay beyond 7 days, hidden again on the way.
func TestTimeInQueueOfADelayedMessageStartsWhenItIsDue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		send func(context.Context, *azdispatch.Publisher[string], time.Time) (azdispatch.Sent, error)
	}{
		{"a minute", func(ctx context.Context, p *azdispatch.Publisher[string], _ time.Time) (azdispatch.Sent, error) {
			return p.SendAfter(ctx, "m", time.Minute)
		}},
		{"at a time", func(ctx context.Context, p *azdispatch.Publisher[string], now time.Time) (azdispatch.Sent, error) {
			return p.SendAt(ctx, "m", now.Add(90*time.Second))
		}},
		{"ten days", func(ctx context.Context, p *azdispatch.Publisher[string], _ time.Time) (azdispatch.Sent, error) {
			return p.SendAfter(ctx, "m", 10*24*time.Hour)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := memqueue.NewManualClock(startOfSecond)
			q := memqueue.New("latency-delayed", &memqueue.Options{Clock: clock})
			pub, err := azdispatch.NewPublisher[string](q, nil)
			require.NoError(t, err)
			sent, err := tc.send(ctx, pub, clock.Now())
			require.NoError(t, err)
			var w waits
			l, err := azdispatch.NewListener(q, w.handler(nil), &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
			require.NoError(t, err)
			running(t, l)
			hops := int64(0)
			for clock.Now().Add(week).Before(sent.Due) {
				clock.Advance(week)
				hops++
				waitUntil(t, "hidden again", func() bool { return l.State().Rehidden == hops })
			}
			clock.Advance(sent.Due.Sub(clock.Now()) + 4*time.Second)
			waitUntil(t, "handled", func() bool { return l.State().Succeeded == 1 })
			got := w.all()
			require.Len(t, got, 1)
			assert.Equal(t, 4*time.Second, got[0].TimeInQueue)
			assert.Equal(t, 4*time.Second, l.State().TimeInQueue.Max)
		})
	}
}

// OldestAge reads the front message's age on the queue's clock: from its
// insertion, or its due time; over a sharded queue, the oldest front.
func TestOldestAgeOnTheQueuesClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(startOfSecond)
	a := memqueue.New("latency-age-a", &memqueue.Options{Clock: clock})
	b := memqueue.New("latency-age-b", &memqueue.Options{Clock: clock})
	age, err := azdispatch.OldestAge(ctx, a)
	require.NoError(t, err)
	assert.Zero(t, age, "empty")

	_, err = a.Send(ctx, "old", nil)
	require.NoError(t, err)
	clock.Advance(30 * time.Second)
	pub, err := azdispatch.NewPublisher[string](b, nil)
	require.NoError(t, err)
	_, err = pub.SendAfter(ctx, "due in 10 s", 10*time.Second)
	require.NoError(t, err)
	clock.Advance(12 * time.Second)

	age, err = azdispatch.OldestAge(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, 42*time.Second, age)
	age, err = azdispatch.OldestAge(ctx, b)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, age, "from its due time")

	sq, err := azdispatch.NewShardedQueue("latency-age", []azdispatch.Shard{a, b}, nil)
	require.NoError(t, err)
	age, err = azdispatch.OldestAge(ctx, sq)
	require.NoError(t, err)
	assert.Equal(t, 42*time.Second, age)
	assert.Equal(t, int64(3), a.Transactions().Other, "one peek each reading")

	b.FailNext("peek", 1, nil)
	_, err = azdispatch.OldestAge(ctx, sq)
	require.Error(t, err, "a shard that cannot be read fails the reading: the rest could be younger")
	assert.Contains(t, err.Error(), "latency-age-b")
}

// A listener scaling to a target wait asks for the dequeuers Little's law
// gives, and says once when the target is out of reach of MaxDequeuers.
func TestTargetWaitScalesByLittlesLawAndSaysWhenUnmet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("latency-target", nil)
	var mu sync.Mutex
	var unmet []azdispatch.Event
	release := make(chan struct{})
	l, err := azdispatch.NewListener(q, func(ctx context.Context, _ *azdispatch.Message[int]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			TargetWait:    2 * time.Second,
			BatchSize:     2,
			MaxDequeuers:  3,
			ScaleInterval: time.Millisecond,
		},
		Concurrency: 2,
		OnEvent: func(e azdispatch.Event) {
			if e.Kind == azdispatch.EventTargetUnmet {
				mu.Lock()
				unmet = append(unmet, e)
				mu.Unlock()
			}
		},
	})
	require.NoError(t, err)
	for i := range 40 {
		_, err := q.Send(ctx, "1", nil)
		require.NoError(t, err, i)
	}
	stop := running(t, l)
	// A backlog of 38 within 2 s, 2 per receive: 19 dequeuers, 3 allowed.
	waitUntil(t, "the target found out of reach", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(unmet) > 0
	})
	s := l.State()
	assert.Greater(t, s.Wanted, 3)
	assert.LessOrEqual(t, s.MaxActiveDequeuers, 3)
	close(release)
	waitUntil(t, "all handled", func() bool { return l.State().Succeeded == 40 })
	waitUntil(t, "drained: nothing wanted", func() bool { return l.State().Wanted == 0 })
	mu.Lock()
	first := len(unmet)
	assert.Equal(t, "target-unmet", unmet[0].Kind.String())
	mu.Unlock()

	// Out of reach again after a drain: said again.
	for i := range 40 {
		_, err := q.Send(ctx, "1", nil)
		require.NoError(t, err, i)
	}
	waitUntil(t, "the target out of reach again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(unmet) > first
	})
	waitUntil(t, "all handled", func() bool { return l.State().Succeeded == 80 })
	require.NoError(t, stop())
}

// A delayed message lives its TTL past its due time: a delay longer than
// the TTL is no mistake.
func TestADelayedMessageLivesItsTTLPastItsDueTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(startOfSecond)
	q := memqueue.New("latency-ttl", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{TTL: 24 * time.Hour})
	require.NoError(t, err)
	sent, err := pub.SendAfter(ctx, "in two days", 48*time.Hour)
	require.NoError(t, err)
	clock.Advance(48*time.Hour + 23*time.Hour)
	got, err := q.Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1, "still there, 23 hours after it was due")
	assert.Equal(t, sent.Due.Add(24*time.Hour), got[0].ExpiresAt)
}

func TestTargetWaitOptionsAreChecked(t *testing.T) {
	q := memqueue.New("latency-options", nil)
	h := func(context.Context, *azdispatch.Message[int]) error { return nil }
	_, err := azdispatch.NewListener(q, h, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{TargetWait: -time.Second}})
	var ce *azdispatch.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ListenerOptions.Scaling.TargetWait", ce.Field)
	_, err = azdispatch.NewListener(q, h, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{TargetWait: time.Second, Scale: azdispatch.ScaleByDepth(1)}})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ListenerOptions.Scaling.TargetWait", ce.Field)
}

// Retries are counted by cause: a handler's error, panic and timeout, and
// a poison move that failed.
func TestRetriesAreCountedByCause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body     string
		maxTries int64
		want     azdispatch.RetryCounts
	}{
		{"error", 5, azdispatch.RetryCounts{Error: 1}},
		{"panic", 5, azdispatch.RetryCounts{Panic: 1}},
		{"timeout", 5, azdispatch.RetryCounts{Timeout: 1}},
		// Its one try failed: poisoned at once, and the move fails.
		{"poison", 1, azdispatch.RetryCounts{Poison: 1}},
	} {
		t.Run(tc.body, func(t *testing.T) {
			t.Parallel()
			q := memqueue.New("latency-causes-"+tc.body, nil)
			_, err := q.Send(context.Background(), `"`+tc.body+`"`, nil)
			require.NoError(t, err)
			q.PoisonQueue().(*memqueue.Queue).FailNext(azdispatch.OpSend, 1, nil)
			l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[string]) error {
				switch m.Body {
				case "panic":
					panic("boom")
				case "timeout":
					<-ctx.Done()
					return context.Cause(ctx)
				}
				return errors.New("no")
			}, &azdispatch.ListenerOptions{
				Scaling: azdispatch.ScalingOptions{
					Idle: quickIdle,
				},
				HandlerTimeout:  100 * time.Millisecond,
				MaxDequeueCount: tc.maxTries,
				Retry:           func(int64) time.Duration { return time.Hour },
			})
			require.NoError(t, err)
			stop := running(t, l)
			waitUntil(t, "retried", func() bool { return l.State().Retried == 1 })
			require.NoError(t, stop())
			assert.Equal(t, tc.want, l.State().RetriedFor)
		})
	}
}

// A burst that comes soon after a depth reading is met by the full
// receives it causes, not after the rest of ScaleInterval: with a target
// of 5 s, a few messages cause a reading, and 100 more two seconds later
// are almost all handled within the target. (They waited for the next
// reading, 10 s on: 78-82 % of the burst was over the target.)
func TestABurstSoonAfterADepthReadingIsMetWithinTheTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("latency-burst", nil)
	var w waits
	record := w.handler(nil)
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[string]) error {
		time.Sleep(400 * time.Millisecond)
		return record(ctx, m)
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			TargetWait:   5 * time.Second,
			MaxDequeuers: 8,
			Idle:         azdispatch.ExponentialIdle(0, 100*time.Millisecond),
		},
		Concurrency: 4,
		Codec:       azdispatch.Raw(),
	})
	require.NoError(t, err)
	running(t, l)
	for range 6 {
		_, err := q.Send(ctx, "first", nil)
		require.NoError(t, err)
	}
	waitUntil(t, "the first read the depth", func() bool { return l.State().Depth > 0 })
	time.Sleep(2 * time.Second)
	for range 100 {
		_, err := q.Send(ctx, "burst", nil)
		require.NoError(t, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for l.State().Succeeded < 106 {
		if time.Now().After(deadline) {
			t.Fatalf("%+v", l.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	over := 0
	for _, m := range w.all() {
		if m.Body == "burst" && m.TimeInQueue > 5*time.Second {
			over++
		}
	}
	t.Logf("%d of 100 over the target; %d dequeuers at most, %d scale-ups", over, l.State().MaxActiveDequeuers, l.State().ScaleUps)
	assert.LessOrEqual(t, over, 20, "the burst is met within the target")
}
