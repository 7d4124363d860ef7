package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// keyRecorder is a handler that checks, at every call, that no more than
// limit messages of one key run at once, and records every call.
type keyRecorder struct {
	limit  int
	busy   time.Duration
	mu     sync.Mutex
	inside map[string]int
	calls  map[string]int // by message ID
	counts []int64        // DequeueCount seen at each call
	over   []string
}

func newKeyRecorder(limit int, busy time.Duration) *keyRecorder {
	return &keyRecorder{limit: limit, busy: busy, inside: map[string]int{}, calls: map[string]int{}}
}

func (r *keyRecorder) handle(_ context.Context, m *azdispatch.Message[string]) error {
	r.mu.Lock()
	r.inside[m.Key]++
	if n := r.inside[m.Key]; n > r.limit {
		r.over = append(r.over, fmt.Sprintf("%d of key %q at once", n, m.Key))
	}
	r.calls[m.ID]++
	r.counts = append(r.counts, m.DequeueCount)
	r.mu.Unlock()
	time.Sleep(r.busy)
	r.mu.Lock()
	r.inside[m.Key]--
	r.mu.Unlock()
	return nil
}

func (r *keyRecorder) handled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// advancing moves clock on by step every few milliseconds until the test
// ends, so that snoozed messages come back without the test's waiting.
func advancing(t *testing.T, clock *memqueue.ManualClock, step time.Duration) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				clock.Advance(step)
			}
		}
	}()
	t.Cleanup(func() { close(done); wg.Wait() })
}

// Messages of a few hot keys, with a limit of one: no two of a key run at
// once, every message runs once, and none counts a try for waiting (each
// handler call sees DequeueCount 1, with MaxDequeueCount 1: a counted wait
// would poison it).
func TestAKeysMessagesRunOneAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	advancing(t, b.clock, time.Second)
	const keys, each = 4, 25
	for i := range keys * each {
		_, err := b.pub.SendKeyed(b.ctx, fmt.Sprint("customer-", i%keys), fmt.Sprint(i))
		require.NoError(t, err)
	}
	rec := newKeyRecorder(1, time.Millisecond)
	l, err := azdispatch.NewListener(b.queue, rec.handle, &azdispatch.ListenerOptions{
		MaxDequeueCount: 1, Limits: azdispatch.LimitOptions{PerKey: 1},
		Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MinDequeuers: 2, MaxDequeuers: 4},
	})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return rec.handled() == keys*each })
	require.NoError(t, stop())

	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Empty(t, rec.over)
	for id, n := range rec.calls {
		assert.Equal(t, 1, n, "message %s ran once", id)
	}
	for _, c := range rec.counts {
		require.EqualValues(t, 1, c, "a wait for the key is not a try")
	}
	s := l.State()
	assert.Zero(t, s.Poisoned)
	assert.EqualValues(t, keys*each, s.Succeeded)
	assert.Positive(t, s.Snoozed+s.KeyWaits, "hot keys made messages wait")
	t.Logf("snoozed %d, waited in hand %d, received %d", s.Snoozed, s.KeyWaits, s.Received)
}

// A limit of two lets two of a key run at once, and never three.
func TestAKeyLimitOfTwoRunsTwoAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	advancing(t, b.clock, time.Second)
	for i := range 30 {
		_, err := b.pub.SendKeyed(b.ctx, "hot", fmt.Sprint(i))
		require.NoError(t, err)
	}
	rec := newKeyRecorder(2, 5*time.Millisecond)
	var most atomic.Int32
	handler := func(ctx context.Context, m *azdispatch.Message[string]) error {
		rec.mu.Lock()
		n := int32(rec.inside[m.Key] + 1)
		rec.mu.Unlock()
		for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
		}
		return rec.handle(ctx, m)
	}
	l, err := azdispatch.NewListener(b.queue, handler, &azdispatch.ListenerOptions{
		Limits: azdispatch.LimitOptions{PerKey: 2}, Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MaxDequeuers: 4},
	})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "every message handled", func() bool { return rec.handled() == 30 })
	require.NoError(t, stop())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Empty(t, rec.over)
	assert.LessOrEqual(t, most.Load(), int32(2))
}

// The handler reads the key it was sent with; a message without one has
// none, and is not limited.
func TestTheHandlerReadsTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.pub.SendKeyed(b.ctx, "order-7", "a")
	require.NoError(t, err)
	_, err = b.pub.Send(b.ctx, "b")
	require.NoError(t, err)
	_, stop := b.listen(nil, &azdispatch.ListenerOptions{Limits: azdispatch.LimitOptions{PerKey: 1}})
	waitUntil(t, "both handled", func() bool { return len(b.handled.get()) == 2 })
	require.NoError(t, stop())
	keys := map[string]string{}
	for _, c := range b.handled.get() {
		keys[c.m.Body] = c.m.Key
	}
	assert.Equal(t, map[string]string{"a": "order-7", "b": ""}, keys)
}

// Snooze puts the message back for its time without counting a try, again
// and again: with MaxDequeueCount 2, three snoozes do not poison it.
func TestSnoozePutsAMessageBackWithoutATry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sent, err := b.pub.Send(b.ctx, "not yet")
	require.NoError(t, err)
	var calls atomic.Int32
	var seen sync.Map
	handler := func(_ context.Context, m *azdispatch.Message[string]) error {
		n := calls.Add(1)
		seen.Store(n, m.DequeueCount)
		if n <= 3 {
			return azdispatch.Snooze(time.Minute)
		}
		return nil
	}
	l, err := azdispatch.NewListener(b.queue, handler, &azdispatch.ListenerOptions{MaxDequeueCount: 2, Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	stop := running(t, l)
	for i := int32(1); i <= 3; i++ {
		waitUntil(t, "snoozed", func() bool { return l.State().Snoozed == int64(i) })
		msgs, err := b.queue.Peek(b.ctx, 1)
		require.NoError(t, err)
		assert.Empty(t, msgs, "hidden while it sleeps")
		b.clock.Advance(59 * time.Second)
		time.Sleep(20 * time.Millisecond)
		assert.Equal(t, i, calls.Load(), "not back before its minute")
		b.clock.Advance(2 * time.Second)
	}
	waitUntil(t, "handled", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	for i := int32(1); i <= 4; i++ {
		c, _ := seen.Load(i)
		assert.EqualValues(t, 1, c, "call %d: a snooze is not a try", i)
	}
	s := l.State()
	assert.Zero(t, s.Poisoned)
	assert.Zero(t, s.Failed)
	assert.EqualValues(t, 3, s.Snoozed)
	assert.EqualValues(t, 3, s.Transactions.Update, "one Update Message per snooze")
	_ = sent
}

// A text with no room for the snooze's line is released as a retry: that
// delivery counts, and the handler sees it.
func TestASnoozeWithoutRoomIsARetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pub, err := azdispatch.NewPublisher[string](b.queue, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	_, err = pub.Send(b.ctx, strings.Repeat("x", azdispatch.MaxMessageSize-10))
	require.NoError(t, err)
	var counts []int64
	var mu sync.Mutex
	handler := func(_ context.Context, m *azdispatch.Message[string]) error {
		mu.Lock()
		defer mu.Unlock()
		counts = append(counts, m.DequeueCount)
		if len(counts) == 1 {
			return azdispatch.Snooze(time.Second)
		}
		return nil
	}
	l, err := azdispatch.NewListener(b.queue, handler, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "released", func() bool { return l.State().Retried == 1 })
	b.clock.Advance(2 * time.Second)
	waitUntil(t, "handled", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int64{1, 2}, counts)
	assert.Zero(t, l.State().Snoozed)
}

// A keyed message keeps room in its text to be snoozed: one that would fill
// the message is offloaded (here to memqueue's payload store), and one
// without a key is not.
func TestAKeyedMessageKeepsRoomToBeSnoozed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pub, err := azdispatch.NewPublisher[string](b.queue, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	_, err = pub.SendKeyed(b.ctx, "k", strings.Repeat("x", azdispatch.MaxMessageSize-60))
	require.NoError(t, err)
	_, err = pub.Send(b.ctx, strings.Repeat("y", azdispatch.MaxMessageSize-60))
	require.NoError(t, err)
	msgs, err := b.queue.Peek(b.ctx, 2)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	kinds := map[string]azdispatch.TextKind{}
	for _, m := range msgs {
		info := azdispatch.DescribeText(m.Text)
		kinds[info.Metadata[azdispatch.MetadataKey]] = info.Kind
	}
	assert.Equal(t, map[string]azdispatch.TextKind{"k": azdispatch.TextPointer, "": azdispatch.TextPlain}, kinds,
		"the keyed one offloaded; without a key it fits")
}

// Random keys, limits and handler times: never more than the limit of a
// key at once, every message once, no try counted for waiting.
func TestRandomizedKeyLimits(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for round := range 4 {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			b := setup(t)
			advancing(t, b.clock, time.Second)
			limit, keys, n := 1+rng.IntN(3), 1+rng.IntN(20), 20+rng.IntN(100)
			for i := range n {
				_, err := b.pub.SendKeyed(b.ctx, fmt.Sprint("k", rng.IntN(keys)), fmt.Sprint(i))
				require.NoError(t, err)
			}
			rec := newKeyRecorder(limit, time.Duration(rng.IntN(3000))*time.Microsecond)
			l, err := azdispatch.NewListener(b.queue, rec.handle, &azdispatch.ListenerOptions{
				MaxDequeueCount: 1, Concurrency: 1 + rng.IntN(8), Limits: azdispatch.LimitOptions{PerKey: limit},
				Scaling: azdispatch.ScalingOptions{Idle: quickIdle, BatchSize: 1 + rng.IntN(32), MaxDequeuers: 1 + rng.IntN(4)},
			})
			require.NoError(t, err)
			stop := running(t, l)
			waitUntil(t, "every message handled", func() bool { return rec.handled() == n })
			require.NoError(t, stop())
			rec.mu.Lock()
			defer rec.mu.Unlock()
			assert.Empty(t, rec.over, "limit %d", limit)
			for _, c := range rec.counts {
				require.EqualValues(t, 1, c)
			}
			assert.Zero(t, l.State().Poisoned)
		})
	}
}

// Three listeners over one queue, each with a limit of one per key held
// across instances by blob leases in the queue's payload store: no two
// messages of a key run at once in any of them, every message runs once,
// and waiting is never a try.
func TestAKeyLimitHoldsAcrossListeners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New(queueNameOf(t), nil)
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	const keys, each = 6, 15
	for i := range keys * each {
		_, err := pub.SendKeyed(ctx, fmt.Sprint("account-", i%keys), fmt.Sprint(i))
		require.NoError(t, err)
	}
	rec := newKeyRecorder(1, 2*time.Millisecond)
	var ls []*azdispatch.Listener[string]
	for range 3 {
		l, err := azdispatch.NewListener(q, rec.handle, &azdispatch.ListenerOptions{
			MaxDequeueCount: 1, Limits: azdispatch.LimitOptions{PerKey: 1, AcrossInstances: true},
			Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MaxDequeuers: 2, BatchSize: 8},
		})
		require.NoError(t, err)
		ls = append(ls, l)
		stop := running(t, l)
		t.Cleanup(func() { require.NoError(t, stop()) })
	}
	waitUntil(t, "every message handled", func() bool { return rec.handled() == keys*each })
	rec.mu.Lock()
	assert.Empty(t, rec.over)
	for id, n := range rec.calls {
		assert.Equal(t, 1, n, "message %s ran once", id)
	}
	for _, c := range rec.counts {
		require.EqualValues(t, 1, c, "a wait for the key is not a try")
	}
	rec.mu.Unlock()
	var leases, elsewhere, snoozed int64
	for _, l := range ls {
		s := l.State()
		assert.Zero(t, s.Poisoned)
		leases += s.Transactions.BlobLease
		elsewhere += s.KeysHeldElsewhere
		snoozed += s.Snoozed
	}
	t.Logf("%d messages: %d Lease Blob requests, %d snoozed (%d for a key held elsewhere)", keys*each, leases, snoozed, elsewhere)
	// An acquire and a release per message, one refused acquire per
	// snooze for a key held elsewhere, and each listener's first take of
	// a key (which makes its blob: two acquires).
	assert.LessOrEqual(t, leases, int64(2*keys*each)+elsewhere+int64(3*keys*2), "at most two per message, besides refusals and the first of each key")
}

// AcrossInstances needs a payload store for its leases.
func TestAcrossInstancesNeedsAPayloadStore(t *testing.T) {
	t.Parallel()
	// Only a Source's own methods: no payload store to offer.
	q := struct{ azdispatch.Source }{memqueue.New(queueNameOf(t), nil)}
	_, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error { return nil },
		&azdispatch.ListenerOptions{Limits: azdispatch.LimitOptions{PerKey: 1, AcrossInstances: true}})
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
}

// Three listeners of one queue with a fleet limit of three: never more than
// three handler calls at once among them, though each may run eight, and
// every message runs.
func TestAFleetLimitHoldsAcrossListeners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New(queueNameOf(t), nil)
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	const n, fleet = 150, 3
	for i := range n {
		_, err := pub.Send(ctx, fmt.Sprint(i))
		require.NoError(t, err)
	}
	var inside, most, done atomic.Int32
	handler := func(context.Context, *azdispatch.Message[string]) error {
		k := inside.Add(1)
		for m := most.Load(); k > m && !most.CompareAndSwap(m, k); m = most.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		inside.Add(-1)
		done.Add(1)
		return nil
	}
	var ls []*azdispatch.Listener[string]
	for range 3 {
		l, err := azdispatch.NewListener(q, handler, &azdispatch.ListenerOptions{
			Concurrency: 8, Limits: azdispatch.LimitOptions{Fleet: fleet},
			Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MaxDequeuers: 1, BatchSize: 8},
		})
		require.NoError(t, err)
		ls = append(ls, l)
		stop := running(t, l)
		t.Cleanup(func() { require.NoError(t, stop()) })
	}
	waitUntil(t, "every message handled", func() bool { return done.Load() == n })
	assert.LessOrEqual(t, most.Load(), int32(fleet))
	var leases int64
	for _, l := range ls {
		s := l.State()
		assert.Zero(t, s.Poisoned)
		leases += s.Transactions.BlobLease
	}
	t.Logf("%d messages, at most %d at once: %d Lease Blob requests", n, most.Load(), leases)
}

// A snooze does not count, and does not forget the tries before it: a
// message that failed once, then snoozed, is on its second try when it
// comes back, and is poisoned at its last.
func TestASnoozeKeepsTheTriesBeforeIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.pub.Send(b.ctx, "x")
	require.NoError(t, err)
	var mu sync.Mutex
	var counts []int64
	handler := func(_ context.Context, m *azdispatch.Message[string]) error {
		mu.Lock()
		defer mu.Unlock()
		counts = append(counts, m.DequeueCount)
		if len(counts)%2 == 0 {
			return azdispatch.Snooze(time.Second)
		}
		return errors.New("failed")
	}
	l, err := azdispatch.NewListener(b.queue, handler, &azdispatch.ListenerOptions{
		MaxDequeueCount: 3, Retry: func(int64) time.Duration { return time.Second },
		Scaling: azdispatch.ScalingOptions{Idle: quickIdle},
	})
	require.NoError(t, err)
	advancing(t, b.clock, time.Second)
	stop := running(t, l)
	waitUntil(t, "poisoned", func() bool { return l.State().Poisoned == 1 })
	require.NoError(t, stop())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int64{1, 2, 2, 3, 3}, counts, "fail, snooze, fail, snooze, fail: the third failure is the last try")
}
