package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// setRig is a queue set over memqueues and a record of what its listener
// handled, queue by queue.
type setRig struct {
	t      *testing.T
	ctx    context.Context
	queues []*memqueue.Queue
	set    *azdispatch.QueueSet

	mu      sync.Mutex
	order   []string       // the queue of each handler call, in the order they started
	running map[string]int // handler calls under way, per queue
	peak    map[string]int // the most under way at once, per queue
}

// newSetRig makes memqueues named for the test with suffixes names, and a
// set over them with members' weights and caps from members (its Queue is
// filled in) and opts.
func newSetRig(t *testing.T, names []string, members []azdispatch.SetMember, opts *azdispatch.QueueSetOptions) *setRig {
	t.Helper()
	r := &setRig{t: t, ctx: context.Background(), running: map[string]int{}, peak: map[string]int{}}
	if members == nil {
		members = make([]azdispatch.SetMember, len(names))
	}
	for i, n := range names {
		q := memqueue.New(queueNameOf(t)+"-"+n, nil)
		r.queues = append(r.queues, q)
		members[i].Queue = q
	}
	set, err := azdispatch.NewQueueSet(queueNameOf(t), members, opts)
	require.NoError(t, err)
	r.set = set
	return r
}

// fill sends n messages to queue i, each its queue's suffix and number.
func (r *setRig) fill(i, n int) {
	r.t.Helper()
	for k := range n {
		_, err := r.queues[i].Send(r.ctx, fmt.Sprintf("%q", fmt.Sprint(i, "-", k)), nil)
		require.NoError(r.t, err)
	}
}

// handler records each call's queue, holds it for hold, and returns fail.
func (r *setRig) handler(hold time.Duration, fail error) azdispatch.Handler[string] {
	return func(ctx context.Context, m *azdispatch.Message[string]) error {
		r.mu.Lock()
		r.order = append(r.order, m.Queue)
		r.running[m.Queue]++
		r.peak[m.Queue] = max(r.peak[m.Queue], r.running[m.Queue])
		r.mu.Unlock()
		if hold > 0 {
			time.Sleep(hold)
		}
		r.mu.Lock()
		r.running[m.Queue]--
		r.mu.Unlock()
		return fail
	}
}

// listen starts a listener on the set.
func (r *setRig) listen(h azdispatch.Handler[string], opts *azdispatch.ListenerOptions) *azdispatch.Listener[string] {
	r.t.Helper()
	var o azdispatch.ListenerOptions
	if opts != nil {
		o = *opts
	}
	if o.Scaling.Idle == nil {
		o.Scaling.Idle = quickIdle
	}
	l, err := azdispatch.NewListener(r.set, h, &o)
	require.NoError(r.t, err)
	running(r.t, l)
	return l
}

// calls returns the queues of the handler calls so far, in order.
func (r *setRig) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order...)
}

// While every queue has messages, the weighted set serves each its share:
// over 3,000 messages, within ±5 % of its weight.
func TestQueueSetWeightedSharesFollowTheWeights(t *testing.T) {
	t.Parallel()
	weights := []int{1, 2, 3}
	members := make([]azdispatch.SetMember, len(weights))
	for i, w := range weights {
		members[i].Weight = w
	}
	r := newSetRig(t, []string{"a", "b", "c"}, members, &azdispatch.QueueSetOptions{Order: azdispatch.WeightedShares})
	for i := range weights {
		r.fill(i, 3000)
	}
	// Small receives, as a saturated listener makes: one dequeuer, a
	// few handlers, so that shares are decided message by message.
	r.listen(r.handler(0, nil), &azdispatch.ListenerOptions{Concurrency: 4, Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1, BatchSize: 2}})
	waitUntil(t, "3,000 handled", func() bool { return len(r.calls()) >= 3000 })
	served := map[string]int{}
	for _, q := range r.calls()[:3000] {
		served[q]++
	}
	for i, w := range weights {
		share := float64(served[r.queues[i].Name()]) / 3000
		assert.InDelta(t, float64(w)/6, share, 0.05, "queue %d of weight %d: served %v", i, w, served)
	}
}

// Under strict priority a lower level is read only once the higher one is
// empty: of the messages handled after the first of the low level, at most
// those in hand at the time are of the high level.
func TestQueueSetStrictPriorityReadsALowerLevelOnlyWhenTheHigherIsEmpty(t *testing.T) {
	t.Parallel()
	r := newSetRig(t, []string{"high", "low"}, nil, &azdispatch.QueueSetOptions{Order: azdispatch.StrictPriority, Aging: time.Hour})
	r.fill(1, 300)
	r.fill(0, 300)
	const concurrency, dequeuers = 8, 2
	r.listen(r.handler(0, nil), &azdispatch.ListenerOptions{Concurrency: concurrency, Scaling: azdispatch.ScalingOptions{MaxDequeuers: dequeuers}})
	waitUntil(t, "600 handled", func() bool { return len(r.calls()) >= 600 })
	calls := r.calls()
	firstLow := -1
	highAfter := 0
	for k, q := range calls {
		switch {
		case q == r.queues[1].Name() && firstLow < 0:
			firstLow = k
		case q == r.queues[0].Name() && firstLow >= 0:
			highAfter++
		}
	}
	assert.LessOrEqual(t, highAfter, concurrency*dequeuers, "high-level messages handled after the first low one (it was read at %d)", firstLow)
}

// A lower level is not starved: while the higher level keeps its
// handlers busy, the lower one is still read once per Aging.
func TestQueueSetStrictAgingReadsALowerLevelWhileTheHigherIsBusy(t *testing.T) {
	t.Parallel()
	r := newSetRig(t, []string{"high", "low"}, nil, &azdispatch.QueueSetOptions{Order: azdispatch.StrictPriority, Aging: 50 * time.Millisecond})
	r.fill(0, 5000)
	r.fill(1, 50)
	r.listen(r.handler(time.Millisecond, nil), &azdispatch.ListenerOptions{Concurrency: 4, Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1}})
	waitUntil(t, "a low-level message handled", func() bool {
		for _, q := range r.calls() {
			if q == r.queues[1].Name() {
				return true
			}
		}
		return false
	})
	d, err := r.queues[0].Depth(r.ctx)
	require.NoError(t, err)
	assert.Greater(t, d, 0, "the high level was still busy when the low one was served")
}

// A queue's cap bounds its handler calls under way, while the set's other
// queue uses the rest of the listener's budget; nothing is lost.
func TestQueueSetCapBoundsAQueuesMessagesInHand(t *testing.T) {
	t.Parallel()
	members := []azdispatch.SetMember{{Cap: 2}, {}}
	r := newSetRig(t, []string{"capped", "free"}, members, nil)
	r.fill(0, 60)
	r.fill(1, 60)
	// A long idle back-off: the capped queue's messages are read again
	// only because letting one go wakes the listener.
	l := r.listen(r.handler(5*time.Millisecond, nil), &azdispatch.ListenerOptions{Concurrency: 16,
		Scaling: azdispatch.ScalingOptions{MaxDequeuers: 2, Idle: azdispatch.ExponentialIdle(time.Minute, time.Minute)}})
	waitUntil(t, "120 handled", func() bool { return l.State().Succeeded >= 120 })
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.LessOrEqual(t, r.peak[r.queues[0].Name()], 2, "the capped queue's calls at once")
	assert.Greater(t, r.peak[r.queues[1].Name()], 2, "the other queue's calls at once")
	for _, st := range r.set.State() {
		assert.Zero(t, st.InHand, st.Queue)
		assert.EqualValues(t, 60, st.Received, st.Queue)
	}
}

// Fair shares serve a quiet tenant ahead of a flood: its messages, sent
// while the flood keeps every handler busy, are read at the next receives,
// not after the flood's.
func TestQueueSetFairSharesServeAQuietQueueAheadOfAFlood(t *testing.T) {
	t.Parallel()
	r := newSetRig(t, []string{"flood", "quiet"}, nil, nil)
	r.fill(0, 2000)
	r.listen(r.handler(time.Millisecond, nil), &azdispatch.ListenerOptions{Concurrency: 4, Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1, BatchSize: 2}})
	waitUntil(t, "the flood started", func() bool { return len(r.calls()) > 0 })
	before := len(r.calls())
	r.fill(1, 20)
	quiet := func() (n, at int) {
		for k, q := range r.calls() {
			if q == r.queues[1].Name() {
				n, at = n+1, k
			}
		}
		return n, at
	}
	waitUntil(t, "the quiet tenant's 20 handled", func() bool { n, _ := quiet(); return n == 20 })
	_, last := quiet()
	// Equal shares: about one flood message for each quiet one, and what
	// was in hand when they were sent.
	assert.Less(t, last-before, 60, "messages handled from the quiet tenant's send to its last")
}

// Each message is poisoned into its own queue's poison queue.
func TestQueueSetPoisonsIntoEachMessagesOwnQueue(t *testing.T) {
	t.Parallel()
	r := newSetRig(t, []string{"a", "b"}, nil, nil)
	r.fill(0, 3)
	r.fill(1, 2)
	l := r.listen(r.handler(0, azdispatch.Permanent(errors.New("no"))), nil)
	waitUntil(t, "5 poisoned", func() bool { return l.State().Poisoned == 5 })
	for i, want := range []int{3, 2} {
		d, err := r.queues[i].PoisonQueue().Depth(r.ctx)
		require.NoError(t, err)
		assert.Equal(t, want, d, r.queues[i].Name())
	}
}

// A set refuses members it could not serve as asked.
func TestQueueSetRefusesBadMembers(t *testing.T) {
	t.Parallel()
	q := memqueue.New("q", nil)
	for name, c := range map[string]struct {
		members []azdispatch.SetMember
		opts    *azdispatch.QueueSetOptions
	}{
		"none":          {nil, nil},
		"nil queue":     {[]azdispatch.SetMember{{}}, nil},
		"twice":         {[]azdispatch.SetMember{{Queue: q}, {Queue: q}}, nil},
		"negative cap":  {[]azdispatch.SetMember{{Queue: q, Cap: -1}}, nil},
		"weight, fair":  {[]azdispatch.SetMember{{Queue: q, Weight: 2}}, nil},
		"unknown order": {[]azdispatch.SetMember{{Queue: q}}, &azdispatch.QueueSetOptions{Order: 9}},
		"negative age":  {[]azdispatch.SetMember{{Queue: q}}, &azdispatch.QueueSetOptions{Aging: -1}},
	} {
		_, err := azdispatch.NewQueueSet("set", c.members, c.opts)
		var ce *azdispatch.ConfigError
		assert.ErrorAs(t, err, &ce, name)
	}
}

// A delivery let go twice (a wrapper that deletes and also passes Settled
// on) counts once.
func TestQueueSetCountsADeliveryLetGoTwiceOnce(t *testing.T) {
	t.Parallel()
	r := newSetRig(t, []string{"a"}, nil, nil)
	r.fill(0, 2)
	got, err := r.set.Receive(r.ctx, 2, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.NoError(t, r.set.Delete(r.ctx, got[0]))
	r.set.Settled(got[0])
	assert.Equal(t, 1, r.set.State()[0].InHand)
	r.set.Settled(got[1])
	r.set.Settled(got[1])
	assert.Equal(t, 0, r.set.State()[0].InHand)
}

// Randomized, over memqueues with wake-ups, driven directly: whatever the
// sends, receive sizes, caps and lets-go, a strict set never returns a
// message of a level while a higher level not at its cap still holds a
// visible message after the receive; and no queue has more in hand than
// its cap.
func TestQueueSetStrictOrderRandomized(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	for round := range 20 {
		levels := 2 + rng.IntN(3)
		members := make([]azdispatch.SetMember, levels)
		queues := make([]*memqueue.Queue, levels)
		for i := range members {
			queues[i] = memqueue.New(fmt.Sprintf("level-%d", i), nil)
			members[i] = azdispatch.SetMember{Queue: queues[i], Cap: []int{0, 0, 2, 5}[rng.IntN(4)]}
		}
		emptySkip := []time.Duration{0, time.Hour}[rng.IntN(2)]
		set, err := azdispatch.NewQueueSet("strict", members, &azdispatch.QueueSetOptions{Order: azdispatch.StrictPriority, Aging: time.Hour, RoomWait: -1,
			ShardedQueueOptions: azdispatch.ShardedQueueOptions{EmptySkip: emptySkip}})
		require.NoError(t, err)
		// A listener's subscription: wake-ups mark the queue sent to.
		cancel := set.Subscribe(func() {})
		var held []*azdispatch.Delivery
		for step := range 300 {
			switch k := rng.IntN(10); {
			case k < 4:
				i := rng.IntN(levels)
				for range 1 + rng.IntN(5) {
					_, err := queues[i].Send(ctx, `"m"`, nil)
					require.NoError(t, err)
				}
			case k < 7:
				got, err := set.Receive(ctx, 1+rng.IntN(azdispatch.MaxBatch), time.Hour)
				require.NoError(t, err)
				held = append(held, got...)
				highest := -1
				for _, d := range got {
					highest = max(highest, levelOf(t, d.Queue))
				}
				states := set.State()
				for i := range highest {
					if st := states[i]; st.Cap > 0 && st.InHand >= st.Cap {
						continue
					}
					visible, err := queues[i].Peek(ctx, 1)
					require.NoError(t, err)
					require.Empty(t, visible, "round %d step %d: level %d served while level %d, not at its cap, still holds a message", round, step, highest, i)
				}
				for _, st := range states {
					if st.Cap > 0 {
						require.LessOrEqual(t, st.InHand, st.Cap, "round %d step %d: %s", round, step, st.Queue)
					}
				}
			default:
				if len(held) == 0 {
					continue
				}
				k := rng.IntN(len(held))
				d := held[k]
				held = append(held[:k], held[k+1:]...)
				if rng.IntN(2) == 0 {
					require.NoError(t, set.Delete(ctx, d))
				} else {
					// Let go for a retry: hidden, then settled.
					require.NoError(t, set.SetVisibility(ctx, d, time.Hour))
					set.Settled(d)
				}
			}
		}
		cancel()
	}
}

// levelOf is the level a queue called level-N has.
func levelOf(t *testing.T, queue string) int {
	var n int
	_, err := fmt.Sscanf(queue, "level-%d", &n)
	require.NoError(t, err)
	return n
}

// A sharded queue is a queue of a set like any other: its messages are
// handled, and poisoned into its own shards' poison queues.
func TestQueueSetOverAShardedQueueAndAQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s0, s1, solo := memqueue.New("jobs-0", nil), memqueue.New("jobs-1", nil), memqueue.New("solo", nil)
	jobs, err := azdispatch.NewShardedQueue("jobs", []azdispatch.Shard{s0, s1}, nil)
	require.NoError(t, err)
	set, err := azdispatch.NewQueueSet("mixed", []azdispatch.SetMember{{Queue: jobs}, {Queue: solo, Cap: 1}}, nil)
	require.NoError(t, err)
	for _, text := range []string{`"ok"`, `"bad"`, `"ok"`, `"bad"`} {
		_, err := jobs.Send(ctx, text, nil)
		require.NoError(t, err)
		_, err = solo.Send(ctx, text, nil)
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(set, func(ctx context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "bad" {
			return azdispatch.Permanent(errors.New("bad"))
		}
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	stop := running(t, l)
	waitUntil(t, "all settled", func() bool { s := l.State(); return s.Succeeded == 4 && s.Poisoned == 4 })
	require.NoError(t, stop())
	poisoned := 0
	for _, q := range []*memqueue.Queue{s0, s1} {
		d, err := q.PoisonQueue().Depth(ctx)
		require.NoError(t, err)
		poisoned += d
	}
	assert.Equal(t, 2, poisoned, "the sharded queue's, in its shards' poison queues")
	d, err := solo.PoisonQueue().Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, d, "the queue's own")
	for _, st := range set.State() {
		assert.Zero(t, st.InHand, st.Queue)
		assert.EqualValues(t, 4, st.Received, st.Queue)
	}
}

// hangingQueue is a queue whose receives wait until their context ends, as
// an account that does not answer.
type hangingQueue struct{ *memqueue.Queue }

func (h hangingQueue) Receive(ctx context.Context, _ int, _ time.Duration) ([]*azdispatch.Delivery, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A receive that waits on a queue that hangs holds no room under another
// queue's cap: a receive made meanwhile reads the capped queue (the higher
// level, woken by the send) at once.
func TestQueueSetAHangingQueueHoldsNoOtherQueuesRoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	good := memqueue.New("good", nil)
	set, err := azdispatch.NewQueueSet("set", []azdispatch.SetMember{{Queue: good, Cap: 10}, {Queue: hangingQueue{memqueue.New("hang", nil)}}},
		&azdispatch.QueueSetOptions{Order: azdispatch.StrictPriority, RoomWait: -1, ShardedQueueOptions: azdispatch.ShardedQueueOptions{TryTimeout: 3 * time.Second}})
	require.NoError(t, err)
	first := make(chan error, 1)
	go func() {
		_, err := set.Receive(ctx, 4, time.Minute) // good is empty: it goes on to the hanging queue
		first <- err
	}()
	waitUntil(t, "the first receive at the hanging queue", func() bool { return !set.State()[0].LastRead.IsZero() })
	_, err = good.Send(ctx, `"m"`, nil)
	require.NoError(t, err)
	start := time.Now()
	got, err := set.Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1, "the capped queue's message, though a receive waits on the other queue")
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, 1, set.State()[0].InHand)
	assert.NoError(t, <-first, "the first receive: the capped queue answered, empty")
}

// Deliveries the set did not give are refused, nil included, by the set
// and by its poison queue.
func TestQueueSetRefusesDeliveriesNotItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("q", nil)
	set, err := azdispatch.NewQueueSet("set", []azdispatch.SetMember{{Queue: q}}, nil)
	require.NoError(t, err)
	_, err = q.Send(ctx, `"m"`, nil)
	require.NoError(t, err)
	foreign, err := q.Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, foreign, 1)
	for _, d := range []*azdispatch.Delivery{nil, foreign[0]} {
		assert.Error(t, set.Delete(ctx, d))
		assert.Error(t, set.SetVisibility(ctx, d, 0))
		assert.Error(t, set.PoisonQueue().Delete(ctx, d))
		assert.Error(t, set.PoisonQueue().SetVisibility(ctx, d, 0))
		set.Settled(d) // ignored
	}
}
