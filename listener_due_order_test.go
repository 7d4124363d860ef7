package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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

// orderRecorder is a handler for messages "key/i" that records, per key,
// the i of each call that succeeded, and any call that overlapped another
// of its key.
type orderRecorder struct {
	mu      sync.Mutex
	inside  map[string]bool
	ran     map[string][]int
	overlap []string
	fail    func(m *azdispatch.Message[string], i int) error
}

func newOrderRecorder() *orderRecorder {
	return &orderRecorder{inside: map[string]bool{}, ran: map[string][]int{}}
}

func (r *orderRecorder) handle(_ context.Context, m *azdispatch.Message[string]) error {
	key, n, _ := strings.Cut(m.Body, "/")
	i, _ := strconv.Atoi(n)
	r.mu.Lock()
	if r.inside[key] {
		r.overlap = append(r.overlap, m.Body)
	}
	r.inside[key] = true
	r.mu.Unlock()
	var err error
	if r.fail != nil {
		err = r.fail(m, i)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inside[key] = false
	if err == nil {
		r.ran[key] = append(r.ran[key], i)
	}
	return err
}

func (r *orderRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ran := range r.ran {
		n += len(ran)
	}
	return n
}

// inOrderListeners starts n listeners on q with Limits.InOrder: stand-ins
// for n processes, which share q's payload store for the keys' leases and
// order, as processes share an account's container. Their visibility
// timeout is long: the tests move the queue's clock on by hundreds of
// times the real pace, and a message in hand on a busy machine must not
// reappear, and run twice, meanwhile (renewals follow the real clock).
func inOrderListeners(t *testing.T, q *memqueue.Queue, n int, h azdispatch.Handler[string], limits azdispatch.LimitOptions) []*azdispatch.Listener[string] {
	t.Helper()
	limits.InOrder = true
	var ls []*azdispatch.Listener[string]
	for range n {
		l, err := azdispatch.NewListener(q, h, &azdispatch.ListenerOptions{
			Limits: limits, VisibilityTimeout: time.Hour,
			Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MaxDequeuers: 2, BatchSize: 8},
		})
		require.NoError(t, err)
		stop := running(t, l)
		t.Cleanup(func() { require.NoError(t, stop()) })
		ls = append(ls, l)
	}
	return ls
}

// Each key's messages, sent one after another by one publisher, run in the
// order they were sent, though the queue gives them out in a random order,
// three listeners take them, and some fail their first try: no two of a
// key at once, none poisoned, no gap given up.
func TestAKeysMessagesRunInSendOrderFromAShuffledQueue(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			clock := memqueue.NewManualClock(bundleStart)
			q := memqueue.New(queueNameOf(t), &memqueue.Options{Clock: clock, Shuffle: rand.New(rand.NewPCG(seed, 1))})
			pub, err := azdispatch.NewPublisher[string](q, nil)
			require.NoError(t, err)
			const keys, each = 12, 20
			for i := range each {
				for k := range keys {
					_, err := pub.SendKeyed(t.Context(), fmt.Sprint("account-", k), fmt.Sprintf("account-%d/%d", k, i))
					require.NoError(t, err)
				}
			}
			rec := newOrderRecorder()
			rec.fail = func(m *azdispatch.Message[string], i int) error {
				if i%7 == 3 && m.DequeueCount == 1 {
					return errors.New("first try fails")
				}
				return nil
			}
			ls := inOrderListeners(t, q, 3, rec.handle, azdispatch.LimitOptions{})
			advancing(t, clock, 500*time.Millisecond)
			waitUntil(t, "every message handled", func() bool { return rec.count() == keys*each })

			rec.mu.Lock()
			defer rec.mu.Unlock()
			assert.Empty(t, rec.overlap, "two of a key at once")
			for k := range keys {
				want := make([]int, each)
				for i := range want {
					want[i] = i
				}
				assert.Equal(t, want, rec.ran[fmt.Sprint("account-", k)], "key %d in send order", k)
			}
			var waits, skips, poisoned, writes, lost int64
			for _, l := range ls {
				s := l.State()
				waits, skips, poisoned = waits+s.OrderWaits, skips+s.OrderGapsSkipped, poisoned+s.Poisoned
				lost += s.LeasesLost
			}
			writes = q.Transactions().BlobWrite
			t.Logf("%d messages: %d snoozed to wait for their turn, %d Set Blob Metadata and Put Blob", keys*each, waits, writes)
			assert.Positive(t, waits, "the shuffle put messages before the ones they follow")
			// The queue's clock runs at a hundred times real time, and a
			// key's lease expires by it (30 s: 0.3 s here) while its
			// renewals come by the real one: on a loaded machine a lease
			// can lapse under a call, whose message is then deleted
			// unrecorded, and the next of its key goes on after
			// OrderWait. Only so may a gap be skipped.
			if skips > 0 {
				assert.Positive(t, lost, "a gap skipped with no lease lost")
			}
			assert.Zero(t, poisoned)
		})
	}
}

// A message given up as poison is done in its key's order: the ones after
// it run, without waiting for OrderWait.
func TestAPoisonedMessageDoesNotHoldUpItsKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		_, err := b.pub.SendKeyed(b.ctx, "k", fmt.Sprintf("k/%d", i))
		require.NoError(t, err)
	}
	rec := newOrderRecorder()
	rec.fail = func(_ *azdispatch.Message[string], i int) error {
		if i == 2 {
			return azdispatch.Permanent(errors.New("never"))
		}
		return nil
	}
	ls := inOrderListeners(t, b.queue, 1, rec.handle, azdispatch.LimitOptions{OrderWait: time.Hour})
	advancing(t, b.clock, 100*time.Millisecond)
	waitUntil(t, "the other four handled", func() bool { return rec.count() == 4 })
	rec.mu.Lock()
	assert.Equal(t, []int{0, 1, 3, 4}, rec.ran["k"])
	rec.mu.Unlock()
	s := ls[0].State()
	assert.EqualValues(t, 1, s.Poisoned)
	assert.Zero(t, s.OrderGapsSkipped)
}

// orderFaultRig sends n messages of key "k" and starts one InOrder
// listener whose first call of k/0 arms fault as it ends: the next blob
// write, the order's record of k/0, meets it.
func orderFaultRig(t *testing.T, n int, fault func(q *memqueue.Queue)) (*testBundle, *orderRecorder, *azdispatch.Listener[string]) {
	t.Helper()
	b := setup(t)
	for i := range n {
		_, err := b.pub.SendKeyed(b.ctx, "k", fmt.Sprintf("k/%d", i))
		require.NoError(t, err)
	}
	rec := newOrderRecorder()
	var armed atomic.Bool
	rec.fail = func(_ *azdispatch.Message[string], i int) error {
		if i == 0 && armed.CompareAndSwap(false, true) {
			fault(b.queue) // the key's lease is held by now
		}
		return nil
	}
	ls := inOrderListeners(t, b.queue, 1, rec.handle, azdispatch.LimitOptions{OrderWait: time.Hour})
	advancing(t, b.clock, 100*time.Millisecond)
	return b, rec, ls[0]
}

// A handled message whose key's order could not record it is snoozed, not
// deleted, and runs again: the message after it runs then, not after
// OrderWait (an hour here).
func TestAHandledMessageTheOrderCouldNotRecordRunsAgain(t *testing.T) {
	t.Parallel()
	_, rec, l := orderFaultRig(t, 2, func(q *memqueue.Queue) { q.FailNext(memqueue.OpBlobWrite, 1, nil) })
	waitUntil(t, "both handled and deleted", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.ran["k"]) == 3 && l.State().Succeeded == 2 // counted once deleted
	})
	rec.mu.Lock()
	assert.Equal(t, []int{0, 0, 1}, rec.ran["k"], "0 again, then 1")
	rec.mu.Unlock()
	s := l.State()
	assert.Zero(t, s.OrderGapsSkipped)
	assert.Positive(t, s.Snoozed)
	assert.EqualValues(t, 2, s.Succeeded)
}

// A store that keeps refusing the order's record does not have a handled
// message run for ever: after three runs again it is deleted.
func TestAHandledMessageTheOrderNeverRecordsRunsFourTimesAtMost(t *testing.T) {
	t.Parallel()
	b, rec, l := orderFaultRig(t, 1, func(q *memqueue.Queue) { q.FailNext(memqueue.OpBlobWrite, 1000, nil) })
	waitUntil(t, "handled and deleted", func() bool {
		n, err := b.queue.Depth(b.ctx)
		return err == nil && n == 0 && l.State().Succeeded == 1
	})
	rec.mu.Lock()
	assert.Equal(t, []int{0, 0, 0, 0}, rec.ran["k"], "once, and three times again")
	rec.mu.Unlock()
}

// A handled message whose record in its key's order took effect, but whose
// answer was lost, is snoozed as unrecorded; when it comes back, its key's
// order knows it for handled: it is deleted, not run again after the
// message that follows it.
func TestACopyOfAHandledMessageDoesNotRunAfterTheNext(t *testing.T) {
	t.Parallel()
	b, rec, l := orderFaultRig(t, 3, func(q *memqueue.Queue) { q.LoseNext(memqueue.OpBlobWrite, 1) })
	waitUntil(t, "all handled, the copy deleted", func() bool {
		s := l.State()
		n, err := b.queue.Depth(b.ctx)
		return err == nil && n == 0 && rec.count() >= 3 && s.HandledBefore == 1 && s.InFlight == 0
	})
	rec.mu.Lock()
	assert.Equal(t, []int{0, 1, 2}, rec.ran["k"], "0 once, before 1")
	rec.mu.Unlock()
	assert.Zero(t, l.State().OrderGapsSkipped)
}

// A message that never comes (here, it expired) holds its key up for
// OrderWait, by the queue's clock; then the messages after it run.
func TestAMissingMessageIsGivenUpAfterOrderWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	send := func(i int, ttl time.Duration) {
		_, err := b.pub.SendWith(b.ctx, fmt.Sprintf("k/%d", i), &azdispatch.SendOptions{Key: "k", TTL: ttl})
		require.NoError(t, err)
	}
	send(0, 0)
	send(1, time.Minute)
	send(2, 0)
	send(3, 0)
	b.clock.Advance(2 * time.Minute) // 1 expires
	stuck := b.clock.Now()
	const wait = 10 * time.Minute
	rec := newOrderRecorder()
	var ranAt sync.Map
	rec.fail = func(_ *azdispatch.Message[string], i int) error {
		ranAt.Store(i, b.clock.Now())
		return nil
	}
	ls := inOrderListeners(t, b.queue, 1, rec.handle, azdispatch.LimitOptions{OrderWait: wait})
	advancing(t, b.clock, time.Second)
	waitUntil(t, "the rest handled", func() bool { return rec.count() == 3 })
	rec.mu.Lock()
	assert.Equal(t, []int{0, 2, 3}, rec.ran["k"])
	rec.mu.Unlock()
	at, _ := ranAt.Load(2)
	assert.False(t, at.(time.Time).Before(stuck.Add(wait)), "2 ran at %v, before OrderWait was over", at)
	s := ls[0].State()
	assert.EqualValues(t, 1, s.OrderGapsSkipped)
	assert.Positive(t, s.OrderWaits)
}

// InOrder runs a key's messages one at a time: a PerKey over 1 with it is
// a mistake.
func TestInOrderRefusesMoreThanOnePerKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := azdispatch.NewListener(b.queue, newOrderRecorder().handle, &azdispatch.ListenerOptions{
		Limits: azdispatch.LimitOptions{InOrder: true, PerKey: 2},
	})
	var ce *azdispatch.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ListenerOptions.Limits.PerKey", ce.Field)
}
