package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// batchRecorder records a batch handler's calls: the bodies of each.
type batchRecorder struct {
	mu    sync.Mutex
	calls [][]string
	keys  [][]string
	seen  map[string]int
}

func (r *batchRecorder) record(msgs []*azdispatch.Message[string]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]int{}
	}
	bodies, keys := make([]string, len(msgs)), make([]string, len(msgs))
	for i, m := range msgs {
		bodies[i], keys[i] = m.Body, m.Key
		r.seen[m.Body]++
	}
	r.calls = append(r.calls, bodies)
	r.keys = append(r.keys, keys)
}

func (r *batchRecorder) count(body string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[body]
}

func (r *batchRecorder) snapshot() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.calls...)
}

// sendN sends n messages "0".."n-1" to q.
func sendN(t *testing.T, q azdispatch.Target, n int) {
	t.Helper()
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	for i := range n {
		_, err := pub.Send(context.Background(), fmt.Sprint(i))
		require.NoError(t, err)
	}
}

func batchListener(t *testing.T, q azdispatch.Source, h azdispatch.BatchHandler[string], opts *azdispatch.ListenerOptions) *azdispatch.Listener[string] {
	t.Helper()
	var o azdispatch.ListenerOptions
	if opts != nil {
		o = *opts
	}
	o.Codec = azdispatch.Raw()
	if o.Scaling.Idle == nil {
		o.Scaling.Idle = quickIdle
	}
	if o.Retry == nil {
		o.Retry = func(int64) time.Duration { return 0 }
	}
	l, err := azdispatch.NewBatchListener(q, h, &o)
	require.NoError(t, err)
	return l
}

// With no window, the handler is called once per receive, with every
// message the receive brought.
func TestABatchHandlerGetsEachReceiveInOneCall(t *testing.T) {
	t.Parallel()
	q := memqueue.New(queueNameOf(t), nil)
	const n = 96
	sendN(t, q, n)
	var rec batchRecorder
	l := batchListener(t, q, func(_ context.Context, msgs []*azdispatch.Message[string]) error {
		rec.record(msgs)
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1}})
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == n })
	require.NoError(t, stop())
	s := l.State()
	full := s.Transactions.Receive - s.Transactions.EmptyReceive
	assert.Equal(t, full, s.Calls, "one call per receive that brought messages")
	assert.EqualValues(t, n, s.CallMessages)
	assert.EqualValues(t, n, s.Transactions.Delete, "one delete per message")
	for _, c := range rec.snapshot() {
		assert.LessOrEqual(t, len(c), azdispatch.MaxBatch)
	}
	for i := range n {
		assert.Equal(t, 1, rec.count(fmt.Sprint(i)), "message %d", i)
	}
	t.Logf("%d messages, %d receives, %d calls: %v", n, full, s.Calls, rec.snapshot())
}

// Each message has its own outcome: in a batch of 32 with 3 that always
// fail, exactly those 3 are retried, and poisoned alone at their last
// try; the other 29 are deleted once.
func TestABatchHandlerFailsOnlyTheMessagesItSays(t *testing.T) {
	t.Parallel()
	q := memqueue.New(queueNameOf(t), nil)
	sendN(t, q, 32)
	bad := map[string]bool{"3": true, "17": true, "30": true}
	var rec batchRecorder
	l := batchListener(t, q, func(_ context.Context, msgs []*azdispatch.Message[string]) error {
		rec.record(msgs)
		errs := make([]error, len(msgs))
		for i, m := range msgs {
			if bad[m.Body] {
				errs[i] = fmt.Errorf("item %s refused", m.Body)
			}
		}
		return azdispatch.PerMessage(errs)
	}, &azdispatch.ListenerOptions{MaxDequeueCount: 3})
	stop := running(t, l)
	waitUntil(t, "29 handled, 3 poisoned", func() bool { s := l.State(); return s.Succeeded == 29 && s.Poisoned == 3 })
	require.NoError(t, stop())
	s := l.State()
	assert.EqualValues(t, 29, s.Transactions.Delete-3, "29 deleted, and the 3 moved to the poison queue")
	assert.EqualValues(t, 6, s.Retried, "the 3 retried twice each")
	for i := range 32 {
		body := fmt.Sprint(i)
		want := 1
		if bad[body] {
			want = 3
		}
		assert.Equal(t, want, rec.count(body), "message %s", body)
	}
	poisoned, err := q.PoisonQueue().(*memqueue.Queue).Depth(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, poisoned)
}

// A plain error is every message's outcome; a panic fails every message;
// so do a count of outcomes that does not match, and a handler that ends
// its goroutine (runtime.Goexit, as testing's FailNow does).
func TestABatchHandlersPlainErrorPanicAndMiscountApplyToAll(t *testing.T) {
	t.Parallel()
	for name, fail := range map[string]func(msgs []*azdispatch.Message[string]) error{
		"error": func([]*azdispatch.Message[string]) error { return errors.New("the bulk insert failed") },
		"panic": func([]*azdispatch.Message[string]) error { panic("boom") },
		"miscount": func([]*azdispatch.Message[string]) error {
			return &azdispatch.BatchError{Errs: []error{errors.New("one")}}
		},
		"goexit": func([]*azdispatch.Message[string]) error {
			runtime.Goexit()
			return nil
		},
		"typed nil": func([]*azdispatch.Message[string]) error {
			var none *azdispatch.BatchError
			return none
		},
		"miscount with a Permanent": func(msgs []*azdispatch.Message[string]) error {
			// Not every message is poisoned: the Permanent was one
			// message's, and the count says the outcomes are not theirs.
			return &azdispatch.BatchError{Errs: append(make([]error, len(msgs)), azdispatch.Permanent(errors.New("one")))}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q := memqueue.New(queueNameOf(t), nil)
			sendN(t, q, 10)
			var mu sync.Mutex
			tries := 0
			l := batchListener(t, q, func(_ context.Context, msgs []*azdispatch.Message[string]) error {
				mu.Lock()
				tries++
				first := tries == 1
				mu.Unlock()
				if first {
					return fail(msgs)
				}
				return nil
			}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1}})
			stop := running(t, l)
			waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == 10 })
			require.NoError(t, stop())
			s := l.State()
			assert.EqualValues(t, 10, s.Failed, "every message of the first call failed")
			assert.EqualValues(t, 10, s.Retried)
			assert.Zero(t, s.Poisoned)
			if name == "panic" {
				assert.EqualValues(t, 10, s.Panics)
			}
		})
	}
}

// With ByKey, every call holds the messages of one key only.
func TestABatchHandlerByKeyCallsOneKeyAtATime(t *testing.T) {
	t.Parallel()
	q := memqueue.New(queueNameOf(t), nil)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	const n, keys = 120, 7
	for i := range n {
		_, err := pub.SendKeyed(context.Background(), fmt.Sprint("k", i%keys), fmt.Sprint(i))
		require.NoError(t, err)
	}
	var rec batchRecorder
	l := batchListener(t, q, func(_ context.Context, msgs []*azdispatch.Message[string]) error {
		rec.record(msgs)
		return nil
	}, &azdispatch.ListenerOptions{Batch: azdispatch.BatchOptions{ByKey: true, MaxItems: 10, MaxWait: 200 * time.Millisecond}})
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == n })
	require.NoError(t, stop())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, keys := range rec.keys {
		require.NotEmpty(t, keys)
		assert.LessOrEqual(t, len(keys), 10)
		for _, k := range keys {
			assert.Equal(t, keys[0], k, "a call of one key: %v", keys)
		}
	}
	t.Logf("%d messages of %d keys in %d calls", n, keys, len(rec.keys))
}

// With a window, a call gathers messages across receives up to MaxItems.
func TestABatchHandlerGathersAcrossReceivesWithinItsWindow(t *testing.T) {
	t.Parallel()
	q := memqueue.New(queueNameOf(t), nil)
	const n = 100
	sendN(t, q, n)
	var rec batchRecorder
	l := batchListener(t, q, func(_ context.Context, msgs []*azdispatch.Message[string]) error {
		rec.record(msgs)
		return nil
	}, &azdispatch.ListenerOptions{Concurrency: 1, Batch: azdispatch.BatchOptions{MaxItems: n, MaxWait: time.Minute}})
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == n })
	require.NoError(t, stop())
	calls := rec.snapshot()
	require.Len(t, calls, 1, "100 messages in one call")
	assert.Len(t, calls[0], n)
	assert.Greater(t, l.State().Transactions.Receive, int64(3), "gathered from several receives")
}

// A call that runs past HandlerTimeout ends its messages' calls: they are
// retried, and the handler's context says why.
func TestABatchHandlerThatHangsHasItsMessagesRetried(t *testing.T) {
	t.Parallel()
	q := memqueue.New(queueNameOf(t), nil)
	sendN(t, q, 5)
	var mu sync.Mutex
	calls := 0
	var cause error
	l := batchListener(t, q, func(ctx context.Context, msgs []*azdispatch.Message[string]) error {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			<-ctx.Done()
			mu.Lock()
			cause = context.Cause(ctx)
			mu.Unlock()
			return ctx.Err()
		}
		return nil
	}, &azdispatch.ListenerOptions{HandlerTimeout: 200 * time.Millisecond, Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1}})
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == 5 })
	require.NoError(t, stop())
	s := l.State()
	assert.EqualValues(t, 5, s.RetriedFor.Timeout, "%+v", s.RetriedFor)
	mu.Lock()
	defer mu.Unlock()
	assert.ErrorIs(t, cause, azdispatch.ErrHandlerTimeout)
}

// At shutdown, messages waiting in a window for their call are not
// called: they are made visible again at once.
func TestABatchStillGatheringAtShutdownIsReleased(t *testing.T) {
	t.Parallel()
	q := memqueue.New(queueNameOf(t), nil)
	sendN(t, q, 5)
	called := make(chan int, 10)
	l := batchListener(t, q, func(_ context.Context, msgs []*azdispatch.Message[string]) error {
		called <- len(msgs)
		return nil
	}, &azdispatch.ListenerOptions{Batch: azdispatch.BatchOptions{MaxWait: 10 * time.Minute}})
	stop := running(t, l)
	waitUntil(t, "5 waiting", func() bool { return l.State().InFlight == 5 })
	require.NoError(t, stop())
	s := l.State()
	assert.EqualValues(t, 5, s.Released)
	assert.Zero(t, s.Calls)
	assert.Empty(t, called)
	depth, err := q.Depth(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 5, depth, "visible again at once")
}

// The options of a batch listener are checked.
func TestBatchOptionsAreChecked(t *testing.T) {
	t.Parallel()
	q := memqueue.New(queueNameOf(t), nil)
	h := func(context.Context, []*azdispatch.Message[string]) error { return nil }
	for name, o := range map[string]azdispatch.ListenerOptions{
		"Batch.MaxItems": {Batch: azdispatch.BatchOptions{MaxItems: 1001}},
		"Batch.MaxWait":  {Batch: azdispatch.BatchOptions{MaxWait: -time.Second}},
		"Concurrency":    {Concurrency: -1},
	} {
		_, err := azdispatch.NewBatchListener(q, h, &o)
		var ce *azdispatch.ConfigError
		require.ErrorAs(t, err, &ce, name)
		assert.Contains(t, ce.Field, name)
	}
	_, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error { return nil },
		&azdispatch.ListenerOptions{Batch: azdispatch.BatchOptions{MaxItems: 5}})
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig, "Batch is for NewBatchListener")
}

// The messages of a batch call are messages like any other: batch items
// of SendBatch, claim-checked bodies and delayed messages gather with
// plain ones, a cancelled message never reaches the call, and middleware
// sees each message's call on its own.
func TestABatchHandlerTakesItemsClaimChecksAndDelayedMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New(queueNameOf(t), nil)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	want := map[string]bool{}
	send := func(body string) {
		_, err := pub.Send(ctx, body)
		require.NoError(t, err)
		want[body] = true
	}
	for i := range 10 {
		send(fmt.Sprint("plain-", i))
	}
	large := strings.Repeat("x", 100<<10)
	for i := range 3 {
		send(fmt.Sprint("large-", i, large))
	}
	for b := range 2 {
		items := make([]string, 20)
		for i := range items {
			items[i] = fmt.Sprint("item-", b, "-", i)
			want[items[i]] = true
		}
		_, err := pub.SendBatch(ctx, items, nil)
		require.NoError(t, err)
	}
	for i := range 3 {
		body := fmt.Sprint("later-", i)
		_, err := pub.SendAfter(ctx, body, 50*time.Millisecond)
		require.NoError(t, err)
		want[body] = true
	}
	cancelled, err := pub.SendAfter(ctx, "cancelled", 50*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, pub.Cancel(ctx, cancelled.Token))

	var rec batchRecorder
	var mwMu sync.Mutex
	mwCalls := map[string]int{}
	mw := azdispatch.MiddlewareFunc(func(ctx context.Context, c *azdispatch.Call) error {
		err := c.Next(ctx)
		mwMu.Lock()
		mwCalls[fmt.Sprint(c.ID, "/", c.BatchID, "/", c.Item)]++
		mwMu.Unlock()
		return err
	})
	l := batchListener(t, q, func(_ context.Context, msgs []*azdispatch.Message[string]) error {
		rec.record(msgs)
		return nil
	}, &azdispatch.ListenerOptions{Middleware: []azdispatch.Middleware{mw},
		Batch: azdispatch.BatchOptions{MaxItems: 64, MaxWait: 100 * time.Millisecond}})
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool {
		s := l.State()
		return s.CallMessages == int64(len(want)) && s.InFlight == 0
	})
	require.NoError(t, stop())
	for body := range want {
		assert.Equal(t, 1, rec.count(body), "%.20s", body)
	}
	assert.Zero(t, rec.count("cancelled"))
	s := l.State()
	assert.EqualValues(t, 40, s.ItemsSucceeded)
	mwMu.Lock()
	defer mwMu.Unlock()
	assert.Len(t, mwCalls, len(want), "middleware saw each message's call")
	for k, n := range mwCalls {
		assert.Equal(t, 1, n, k)
	}
	t.Logf("%d messages in %d calls", len(want), s.Calls)
}

// A nil *BatchError is an error like another: reading it does not panic,
// in a listener for one message at a time either.
func TestANilBatchErrorCanBeRead(t *testing.T) {
	t.Parallel()
	var none *azdispatch.BatchError
	var err error = none
	assert.NotPanics(t, func() {
		assert.False(t, errors.Is(err, azdispatch.ErrHandlerTimeout))
		assert.NotEmpty(t, err.Error())
	})
	q := memqueue.New(queueNameOf(t), nil)
	sendN(t, q, 1)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error { return none },
		&azdispatch.ListenerOptions{Codec: azdispatch.Raw(), MaxDequeueCount: 1, Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "poisoned", func() bool { return l.State().Poisoned == 1 })
	require.NoError(t, stop())
}

// Messages waiting for their call hold their bodies against the payload
// budget; the next ones wait for it, and the calls go on with what fits
// (a window closes at MaxWait, or with its receive, without them).
func TestABatchHandlerKeepsToThePayloadBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, batch := range map[string]azdispatch.BatchOptions{
		"no window": {},
		"window":    {MaxItems: 10, MaxWait: 100 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q := memqueue.New(queueNameOf(t), nil)
			pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
			require.NoError(t, err)
			const n = 10
			for i := range n {
				_, err := pub.Send(ctx, fmt.Sprint(i, strings.Repeat("x", 100<<10)))
				require.NoError(t, err)
			}
			var mu sync.Mutex
			most := int64(0)
			var l *azdispatch.Listener[string]
			l = batchListener(t, q, func(_ context.Context, msgs []*azdispatch.Message[string]) error {
				mu.Lock()
				most = max(most, l.State().PayloadBytes)
				mu.Unlock()
				return nil
			}, &azdispatch.ListenerOptions{Batch: batch, Payloads: azdispatch.PayloadOptions{Memory: 1 << 20}})
			stop := running(t, l)
			waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == n })
			require.NoError(t, stop())
			mu.Lock()
			defer mu.Unlock()
			assert.LessOrEqual(t, most, int64(1<<20))
			t.Logf("%d calls; at most %d payload bytes held", l.State().Calls, most)
		})
	}
}

// A message whose ownership is lost while it waits for its call (its
// renewal finds its receipt stale) leaves its batch: it is not called, and
// a batch left empty makes no call. Its next delivery is handled.
func TestAMessageLostWhileWaitingForItsCallLeavesIt(t *testing.T) {
	t.Parallel()
	var stale atomic.Int64
	q := memqueue.New(queueNameOf(t), &memqueue.Options{Intercept: func(_ context.Context, queue string, op azdispatch.Op) error {
		if op == azdispatch.OpUpdate && stale.Add(1) <= 3 {
			return &azdispatch.StorageError{Op: op, Queue: queue, StatusCode: http.StatusNotFound, Code: "MessageNotFound", Err: errors.New("stale")}
		}
		return nil
	}})
	sendN(t, q, 3)
	var rec batchRecorder
	l := batchListener(t, q, func(_ context.Context, msgs []*azdispatch.Message[string]) error {
		rec.record(msgs)
		return nil
	}, &azdispatch.ListenerOptions{VisibilityTimeout: time.Second, Concurrency: 1,
		Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1},
		Batch:   azdispatch.BatchOptions{MaxItems: 10, MaxWait: 3 * time.Second}})
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return l.State().Succeeded == 3 })
	require.NoError(t, stop())
	s := l.State()
	assert.EqualValues(t, 3, s.Lost, "the three lost while waiting")
	calls := rec.snapshot()
	require.Len(t, calls, 1, "the batch they left made no call: %v", calls)
	assert.Len(t, calls[0], 3)
}
