package azdispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenerHandlesEveryMessageOnceAndDeletesIt(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	const n = 200
	sendJobs(t, q, n)

	c := newTally()
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error { return nil }), quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "all handled", func() bool { return l.State().Succeeded == n })
	require.NoError(t, stop())
	assertSettled(t, l.State())

	c.assertEachSucceededOnce(t, n, 0)
	s := l.State()
	assert.EqualValues(t, n, s.Received)
	assert.Zero(t, s.InFlight)
	assert.Zero(t, s.ActiveDequeuers)
	assert.Zero(t, s.Failed+s.Lost+s.Poisoned+s.Released)
	assert.EqualValues(t, n, s.Transactions.Delete)
	assert.Zero(t, s.Transactions.Send, "the listener's own count excludes the publisher")
	full := s.Transactions.Receive - s.Transactions.EmptyReceive
	assert.LessOrEqual(t, full, int64(n/MaxBatch+2), "a busy listener receives full batches")
	assert.Equal(t, 0, depth(t, q))
}

func TestListenerReleasesAFailureForARetryAfterItsDelay(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	const n = 10
	sendJobs(t, q, n)

	var mu sync.Mutex
	firstFailure := map[int]time.Time{}
	var retryGap []time.Duration
	cfg := quick()
	cfg.Retry = func(count int64) time.Duration {
		assert.EqualValues(t, 1, count, "the retry delay is asked with the dequeue count")
		return 2 * time.Second
	}
	c := newTally()
	l, err := NewListener(q, c.handler(func(_ context.Context, m *Message[job]) error {
		mu.Lock()
		defer mu.Unlock()
		if m.DequeueCount == 1 {
			firstFailure[m.Body.N] = time.Now()
			return errors.New("transient")
		}
		retryGap = append(retryGap, time.Since(firstFailure[m.Body.N]))
		return nil
	}), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "all retried and handled", func() bool { return l.State().Succeeded == n })
	require.NoError(t, stop())
	assertSettled(t, l.State())

	c.assertEachSucceededOnce(t, n, 0)
	s := l.State()
	assert.EqualValues(t, n, s.Failed)
	assert.EqualValues(t, n, s.Retried)
	assert.EqualValues(t, n, s.Transactions.Update, "one release per failure")
	for i := range n {
		assert.Equal(t, 2, c.callsOf(i))
	}
	for _, gap := range retryGap {
		assert.GreaterOrEqual(t, gap, 1900*time.Millisecond, "no hot retry: the message stayed hidden for the delay")
	}
}

func TestListenerPoisonsAPermanentFailureAtOnce(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendJobs(t, q, 4)

	c := newTally()
	l, err := NewListener(q, c.handler(func(_ context.Context, m *Message[job]) error {
		if m.Body.N%2 == 1 {
			return Permanent(fmt.Errorf("order %d is malformed", m.Body.N))
		}
		return nil
	}), quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "settled", func() bool { s := l.State(); return s.Succeeded == 2 && s.Poisoned == 2 })
	require.NoError(t, stop())
	assertSettled(t, l.State())

	assert.Equal(t, 1, c.callsOf(1), "no retry of a permanent failure")
	envs := poisonEnvelopes(t, q)
	require.Len(t, envs, 2)
	for _, env := range envs {
		var body job
		require.NoError(t, JSON().Decode(env.Body, &body), "the envelope keeps the original text")
		assert.Equal(t, 1, body.N%2)
		assert.Contains(t, env.Reason, fmt.Sprintf("order %d is malformed", body.N))
		assert.EqualValues(t, 1, env.DequeueCount)
		assert.Equal(t, q.Name(), env.Queue)
		assert.NotEmpty(t, env.MessageID)
		assert.WithinDuration(t, time.Now(), env.PoisonedAt, time.Minute)
		assert.False(t, env.InsertedAt.IsZero())
	}
	assert.Equal(t, 0, depth(t, q))
}

func TestListenerRecoversAPanicAsAFailure(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendJobs(t, q, 3)

	var logs bytes.Buffer
	var logMu sync.Mutex
	cfg := quick()
	cfg.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	c := newTally()
	l, err := NewListener(q, c.handler(func(_ context.Context, m *Message[job]) error {
		if m.DequeueCount == 1 {
			panic(fmt.Sprintf("boom %d", m.Body.N))
		}
		return nil
	}), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "handled on the second try", func() bool { return l.State().Succeeded == 3 })
	require.NoError(t, stop())
	assertSettled(t, l.State())

	s := l.State()
	assert.EqualValues(t, 3, s.Panics)
	assert.EqualValues(t, 3, s.Failed)
	assert.EqualValues(t, 3, s.Retried)
	logMu.Lock()
	defer logMu.Unlock()
	assert.Contains(t, logs.String(), "handler panicked")
	assert.Contains(t, logs.String(), "boom")
	assert.Contains(t, logs.String(), "goroutine", "the stack is logged")
}

func TestListenerPoisonsAMessageThatKeepsFailing(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendJobs(t, q, 1)

	cfg := quick()
	cfg.MaxDequeueCount = 3
	c := newTally()
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error {
		return errors.New("always")
	}), cfg)
	require.NoError(t, err)
	env := poisonedOnce(t, q, l)

	assert.Equal(t, 3, c.callsOf(0), "MaxDequeueCount tries, then poison without a fourth delivery")
	s := l.State()
	assert.EqualValues(t, 3, s.Failed)
	assert.EqualValues(t, 2, s.Retried)
	assert.EqualValues(t, 3, env.DequeueCount)
	assert.Contains(t, env.Reason, "failed 3 times; last error: always")
	assert.Equal(t, 0, depth(t, q))
}

func TestListenerPoisonsAnOverDeliveredMessageWithoutRunningTheHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	sendJobs(t, q, 1)
	// Two processes received it and died before settling it.
	for try := 1; try <= 2; try++ {
		waitFor(t, "visible again", func() bool {
			batch, err := q.Receive(ctx, 1, time.Second)
			return err == nil && len(batch) == 1
		})
	}

	cfg := quick()
	cfg.MaxDequeueCount = 2
	c := newTally()
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error { return nil }), cfg)
	require.NoError(t, err)
	env := poisonedOnce(t, q, l)

	assert.Zero(t, c.callsOf(0), "the handler never saw it")
	assert.EqualValues(t, 3, env.DequeueCount)
	assert.Contains(t, env.Reason, "more than MaxDequeueCount 2")
}

func TestListenerPoisonsWhatItCannotDecode(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendTexts(t, q, 1, func(int) string { return "this is not JSON" })
	sendJobs(t, q, 1)

	c := newTally()
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error { return nil }), quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "settled", func() bool { s := l.State(); return s.Poisoned == 1 && s.Succeeded == 1 })
	require.NoError(t, stop())
	assertSettled(t, l.State())

	assert.Zero(t, l.State().Failed, "a decode error is not a handler failure")
	envs := poisonEnvelopes(t, q)
	require.Len(t, envs, 1)
	assert.Equal(t, "this is not JSON", envs[0].Body)
	assert.Contains(t, envs[0].Reason, "decode:")
}

func TestListenerRenewsVisibilityWhileAHandlerRuns(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendJobs(t, q, 1)

	// Two listeners compete; without renewals the message would reappear
	// after 2 s and the other listener would handle it too.
	cfg := quick()
	cfg.VisibilityTimeout = 2 * time.Second
	c := newTally()
	h := c.handler(func(ctx context.Context, _ *Message[job]) error {
		select {
		case <-time.After(5 * time.Second):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	a, err := NewListener(q, h, cfg)
	require.NoError(t, err)
	b, err := NewListener(q, h, cfg)
	require.NoError(t, err)
	stopA, stopB := started(t, a), started(t, b)
	waitFor(t, "handled", func() bool { return a.State().Succeeded+b.State().Succeeded == 1 })
	require.NoError(t, stopA())
	require.NoError(t, stopB())
	assertSettled(t, a.State())
	assertSettled(t, b.State())

	assert.Equal(t, 1, c.callsOf(0), "handled once: renewals kept it hidden")
	renewed := a.State().Renewed + b.State().Renewed
	assert.GreaterOrEqual(t, renewed, int64(3), "renewed about every second for 5 s")
	assert.Zero(t, a.State().Lost+b.State().Lost)
}

// stealable is a Source that lets a test act as a second process holding
// the pop receipt of a message the listener is working on.
type stealable struct {
	*Queue
	mu   sync.Mutex
	last *Delivery
}

func (s *stealable) Receive(ctx context.Context, max int, vis time.Duration) ([]*Delivery, error) {
	batch, err := s.Queue.Receive(ctx, max, vis)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range batch {
		cp := *d
		s.last = &cp
	}
	return batch, err
}

func TestListenerCancelsTheHandlerWhenOwnershipIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	sendJobs(t, q, 1)
	src := &stealable{Queue: q}

	cfg := quick()
	cfg.VisibilityTimeout = 2 * time.Second
	h, entered, cause := waitsForCancel()
	l, err := NewListener(src, h, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	<-entered

	// Another process changes the message (new pop receipt) and takes it.
	src.mu.Lock()
	other := src.last
	src.mu.Unlock()
	require.NoError(t, q.SetVisibility(ctx, other, 30*time.Second))

	select {
	case err := <-cause:
		assert.ErrorIs(t, err, ErrOwnershipLost)
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	waitFor(t, "counted as lost", func() bool { return l.State().Lost == 1 })
	require.NoError(t, stop())
	assertSettled(t, l.State())
	s := l.State()
	assert.Zero(t, s.Succeeded+s.Failed+s.Retried+s.Poisoned, "nothing settled with a stale receipt")
	require.NoError(t, q.Delete(ctx, other), "the new owner still holds it")
}

func TestListenerHandlerTimeoutCancelsAndRetries(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendJobs(t, q, 1)

	cfg := quick()
	cfg.HandlerTimeout = 300 * time.Millisecond
	cause := make(chan error, 1)
	l, err := NewListener(q, func(ctx context.Context, m *Message[job]) error {
		if m.DequeueCount > 1 {
			return nil
		}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "handled on the retry", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	assertSettled(t, l.State())
	assert.ErrorIs(t, <-cause, ErrHandlerTimeout)
	assert.EqualValues(t, 1, l.State().Retried)
}

func TestListenerShutdownWaitsForRunningHandlers(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendJobs(t, q, 1)

	entered, finish := make(chan struct{}), make(chan struct{})
	l, err := NewListener(q, func(ctx context.Context, _ *Message[job]) error {
		close(entered)
		<-finish
		return ctx.Err() // nil: the drain has not cancelled it
	}, quick())
	require.NoError(t, err)
	stop := started(t, l)
	<-entered

	returned := make(chan error, 1)
	go func() { returned <- stop() }()
	select {
	case <-returned:
		t.Fatal("Run returned while a handler was running")
	case <-time.After(300 * time.Millisecond):
	}
	close(finish)
	require.NoError(t, <-returned)
	assert.EqualValues(t, 1, l.State().Succeeded, "finished during the drain and deleted")
	assert.Equal(t, 0, depth(t, q))
}

func TestListenerShutdownCancelsHandlersAfterTheDrainTimeoutAndReleasesTheirMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	sendJobs(t, q, 1)

	cfg := quick()
	cfg.DrainTimeout = 200 * time.Millisecond
	h, entered, cause := waitsForCancel()
	l, err := NewListener(q, h, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	<-entered
	require.NoError(t, stop())
	assertSettled(t, l.State())

	assert.ErrorIs(t, <-cause, ErrDrainTimeout)
	s := l.State()
	assert.EqualValues(t, 1, s.Released)
	assert.Zero(t, s.Failed, "a shutdown is not a failure")
	batch, err := q.Receive(ctx, 1, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, batch, 1, "visible again at once, not after the visibility timeout")
	assert.EqualValues(t, 2, batch[0].DequeueCount)
}

// gatedSource holds its first receive until the test opens the gate, so a
// receive can complete after the listener was told to stop.
type gatedSource struct {
	*Queue
	inReceive chan struct{}
	gate      chan struct{}
	once      sync.Once
}

func (g *gatedSource) Receive(ctx context.Context, max int, vis time.Duration) ([]*Delivery, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.inReceive)
		<-g.gate
	}
	return g.Queue.Receive(ctx, max, vis)
}

func TestListenerReleasesMessagesReceivedDuringShutdown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	sendJobs(t, q, 5)
	src := &gatedSource{Queue: q, inReceive: make(chan struct{}), gate: make(chan struct{})}

	var handled atomic.Int64
	l, err := NewListener(src, func(context.Context, *Message[job]) error {
		handled.Add(1)
		return nil
	}, quick())
	require.NoError(t, err)
	stop := started(t, l)
	<-src.inReceive
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(100 * time.Millisecond) // let the cancellation land before the receive returns
	close(src.gate)
	require.NoError(t, <-stopped)

	assert.Zero(t, handled.Load(), "nothing starts once the listener is stopping")
	assert.EqualValues(t, 5, l.State().Released)
	batch, err := q.Receive(ctx, MaxBatch, 30*time.Second)
	require.NoError(t, err)
	assert.Len(t, batch, 5, "all visible again at once")
}

func TestListenerRunsOnceAtATime(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	l, err := NewListener(q, func(context.Context, *Message[job]) error { return nil }, quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "running", func() bool { return l.State().ActiveDequeuers == 1 })
	assert.ErrorIs(t, l.Run(context.Background()), ErrAlreadyRunning)
	require.NoError(t, stop())
	assertSettled(t, l.State())
	assert.Zero(t, l.State().ActiveDequeuers)
}

func TestListenerKeepsAForeignMessageItCannotPoison(t *testing.T) {
	t.Parallel()
	// No blob service, so no payload store to offload the body to.
	q := queueWithoutBlobs(t)
	// Another producer sent a message at the service limit: an envelope
	// around it would not fit in the poison queue.
	sendTexts(t, q, 1, func(int) string { return `"` + string(bytes.Repeat([]byte("x"), serviceMessageLimit-2)) + `"` })

	cfg := quick()
	cfg.Retry = func(int64) time.Duration { return time.Hour }
	l, err := NewListener(q, func(context.Context, *Message[string]) error {
		return Permanent(errors.New("unwanted"))
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "poison attempted", func() bool { return l.State().PoisonErrors == 1 })
	require.NoError(t, stop())
	assertSettled(t, l.State())

	assert.Zero(t, l.State().Poisoned)
	assert.Equal(t, 1, depth(t, q), "it stays in its queue, hidden for the retry delay")
	assert.Equal(t, 0, depth(t, q.poisonQueue()))
}

func TestListenerOptionsErrorsNameTheField(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	h := func(context.Context, *Message[job]) error { return nil }
	sas, err := NewQueueWithSAS("https://acct.queue.core.windows.net/orders?sig=x", nil)
	require.NoError(t, err)
	tests := []struct {
		field string
		src   Source
		cfg   *ListenerOptions
	}{
		{"ListenerOptions.Scaling.BatchSize", q, &ListenerOptions{Scaling: ScalingOptions{BatchSize: 33}}},
		{"ListenerOptions.Scaling.BatchSize", q, &ListenerOptions{Scaling: ScalingOptions{BatchSize: -1}}},
		{"ListenerOptions.Concurrency", q, &ListenerOptions{Concurrency: -1}},
		{"ListenerOptions.Scaling.MinDequeuers", q, &ListenerOptions{Scaling: ScalingOptions{MinDequeuers: -2}}},
		{"ListenerOptions.Scaling.MaxDequeuers", q, &ListenerOptions{Scaling: ScalingOptions{MinDequeuers: 3, MaxDequeuers: 2}}},
		{"ListenerOptions.Scaling.PushOnly", q, &ListenerOptions{Scaling: ScalingOptions{PushOnly: true}}},
		{"ListenerOptions.Scaling.PushOnly", q, &ListenerOptions{Scaling: ScalingOptions{PushOnly: true, Wake: q, MinDequeuers: 2}}},
		{"ListenerOptions.Scaling.ScaleInterval", q, &ListenerOptions{Scaling: ScalingOptions{ScaleInterval: -time.Second}}},
		{"ListenerOptions.Payloads.Limits", q, &ListenerOptions{Payloads: PayloadOptions{Limits: PayloadLimits{MaxItems: -1}}}},
		{"ListenerOptions.VisibilityTimeout", q, &ListenerOptions{VisibilityTimeout: 500 * time.Millisecond}},
		{"ListenerOptions.VisibilityTimeout", q, &ListenerOptions{VisibilityTimeout: 8 * 24 * time.Hour}},
		{"ListenerOptions.MaxDequeueCount", q, &ListenerOptions{MaxDequeueCount: -1}},
		{"ListenerOptions.PoisonQueue", sas, nil},
		{"ListenerOptions.Codec", q, &ListenerOptions{Codec: Raw()}},
	}
	for _, tt := range tests {
		_, err := NewListener(tt.src, h, tt.cfg)
		var ce *ConfigError
		if assert.ErrorAs(t, err, &ce, tt.field) {
			assert.Equal(t, tt.field, ce.Field)
			assert.ErrorIs(t, err, ErrInvalidConfig)
		}
	}
	_, err = NewListener(q, Handler[job](nil), nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewListener(sas, h, &ListenerOptions{PoisonQueue: q})
	assert.NoError(t, err, "a SAS queue works with an explicit poison queue")
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestListenerWithAnEndedContextMakesNoRequest(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendJobs(t, q, 3)
	l, err := NewListener(q, func(context.Context, *Message[job]) error { return nil }, quick())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, l.Run(ctx))
	assert.Zero(t, l.State().Transactions.Total(), "no receive that would only cost each message a try: %+v", l.State().Transactions)
	batch, err := q.Receive(context.Background(), MaxBatch, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, batch, 3)
	for _, d := range batch {
		assert.EqualValues(t, 1, d.DequeueCount)
	}
}

// touchy panics when decoded, like a buggy UnmarshalJSON meeting bad input.
type touchy struct{}

func (*touchy) UnmarshalJSON([]byte) error {
	var m map[string]int
	m["boom"]++ // nil map
	return nil
}

func TestListenerPoisonsAMessageWhoseDecoderPanics(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendTexts(t, q, 1, func(int) string { return `{"any":"thing"}` })
	var called atomic.Bool
	l, err := NewListener(q, func(context.Context, *Message[touchy]) error {
		called.Store(true)
		return nil
	}, quick())
	require.NoError(t, err)
	env := poisonedOnce(t, q, l)
	assert.False(t, called.Load())
	assert.Contains(t, env.Reason, "codec panicked")
}

func TestListenerLetsAnotherTryRunWhileAHandlerHangs(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendJobs(t, q, 1)

	cfg := quick()
	cfg.VisibilityTimeout = 2 * time.Second
	cfg.HandlerTimeout = 500 * time.Millisecond
	release := make(chan struct{})
	secondTry := make(chan struct{})
	l, err := NewListener(q, func(ctx context.Context, m *Message[job]) error {
		if m.DequeueCount == 1 {
			<-release // hangs, ignoring its context
			return nil
		}
		close(secondTry)
		return nil
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	select {
	case <-secondTry: // renewals stopped at the timeout, so the message came back
	case <-time.After(30 * time.Second):
		t.Fatal("no second try while the first hung")
	}
	waitFor(t, "second try deleted it", func() bool { return l.State().Succeeded == 1 })
	close(release)
	waitFor(t, "the hung try settled", func() bool { return l.State().Lost == 1 })
	require.NoError(t, stop())
	assertSettled(t, l.State())
	assert.Equal(t, 0, depth(t, q))
}

// Notify reports a EventWoken event only when it ends a back-off or starts a
// dequeuer; a send to a listener that is busy is counted in Wakes only.
func TestWokenEventOnlyWhenSomethingWoke(t *testing.T) {
	var woken atomic.Int64
	cfg := quick()
	cfg.OnEvent = func(e Event) {
		if e.Kind == EventWoken {
			woken.Add(1)
		}
	}
	l, err := NewListener(testQueue(t), func(context.Context, *Message[job]) error { return nil }, cfg)
	require.NoError(t, err)

	l.Notify() // no dequeuer running
	assert.EqualValues(t, 1, woken.Load())

	l.stats.active.Store(2) // both busy
	for range 100 {
		l.Notify()
	}
	assert.EqualValues(t, 1, woken.Load(), "busy dequeuers: no event")

	l.stats.idle.Store(1) // one backing off
	l.Notify()
	assert.EqualValues(t, 2, woken.Load())
	assert.EqualValues(t, 102, l.State().Wakes, "every call counted")
}
