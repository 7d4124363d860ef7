package azdispatch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/payload"
)

// jobs returns jobs 0..n-1.
func jobs(n int) []job {
	items := make([]job, n)
	for i := range items {
		items[i] = job{N: i}
	}
	return items
}

// sendBatch sends jobs 0..n-1 as one batch through a default publisher on q.
func sendBatch(t testing.TB, q *Queue, n int, cfg *PublisherOptions) Sent {
	t.Helper()
	p, err := NewPublisher[job](q, cfg)
	require.NoError(t, err)
	sent, err := p.SendBatch(context.Background(), jobs(n), nil)
	require.NoError(t, err)
	return sent
}

// blobGone reports whether the batch's blob has been deleted.
func blobGone(t testing.TB, store *PayloadStore, id string) bool {
	t.Helper()
	_, _, err := store.properties(context.Background(), id)
	if errors.Is(err, ErrPayloadMissing) {
		return true
	}
	require.NoError(t, err)
	return false
}

func TestBatchRoundTripsThroughTheListener(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 1000, 100_000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			q := testQueue(t)
			p, err := NewPublisher[job](q, nil)
			require.NoError(t, err)
			counted, pub := CountTransactions(context.Background())
			sent, err := p.SendBatch(counted, jobs(n), nil)
			require.NoError(t, err)
			assert.Equal(t, n, sent.Items)
			assert.Len(t, sent.BatchID, payload.BlobIDLen)

			c := newTally()
			var wrong atomic.Int64
			l, err := NewListener(q, c.handler(func(_ context.Context, m *Message[job]) error {
				if m.BatchID != sent.BatchID || m.Item != m.Body.N || m.ID != sent.ID {
					wrong.Add(1)
				}
				return nil
			}), quick())
			require.NoError(t, err)
			stop := started(t, l)
			waitFor(t, "message deleted", func() bool { return l.State().Succeeded == 1 })
			require.NoError(t, stop())
			c.assertEachSucceededOnce(t, n, 0)
			assert.Zero(t, wrong.Load(), "every item carries its batch id and index")
			s := l.State()
			assertSettled(t, s)
			assert.EqualValues(t, n, s.ItemsSucceeded)
			assert.EqualValues(t, n, s.Items)
			assert.True(t, blobGone(t, l.opts.Payloads.Store, sent.BatchID), "the blob is deleted after the message")
			tx := s.Transactions
			assert.Equal(t, int64(1), tx.BlobRead)
			assert.Equal(t, int64(1), tx.BlobDelete)
			assert.Equal(t, int64(1), tx.Delete)
			t.Logf("%d items: publisher %d requests %+v; listener %d requests %+v", n, pub().Total(), pub(), tx.Total(), tx)
		})
	}
}

func TestBatchRedeliveryRunsOnlyTheItemsNotDone(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	const n = 100
	sendBatch(t, q, n, nil)
	c := newTally()
	l, err := NewListener(q, c.handler(func(_ context.Context, m *Message[job]) error {
		if m.Body.N%10 == 3 && m.DequeueCount == 1 {
			return errors.New("transient")
		}
		return nil
	}), quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "batch done", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())

	c.assertEachSucceededOnce(t, n, 0)
	for i := range n {
		want := 1
		if i%10 == 3 {
			want = 2
		}
		assert.Equal(t, want, c.callsOf(i), "item %d", i)
	}
	s := l.State()
	assertSettled(t, s)
	assert.EqualValues(t, 1, s.Retried, "released once, with a checkpoint")
	assert.EqualValues(t, 90, s.ItemsSkipped, "the redelivery skipped what was done")
	assert.EqualValues(t, 110, s.Items)
	assert.EqualValues(t, 10, s.Failed)
	assert.GreaterOrEqual(t, s.Checkpoints, int64(1))
}

func TestBatchPoisonsAnItemThatKeepsFailingAloneAndRequeueBringsItBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	const n = 50
	sent := sendBatch(t, q, n, nil)
	var fixed atomic.Bool
	c := newTally()
	cfg := quick()
	cfg.MaxDequeueCount = 3
	l, err := NewListener(q, c.handler(func(_ context.Context, m *Message[job]) error {
		switch {
		case fixed.Load():
			return nil
		case m.Body.N == 7:
			return errors.New("always fails")
		case m.Body.N == 8:
			return Permanent(errors.New("bad item"))
		}
		return nil
	}), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "batch settled", func() bool { return l.State().Succeeded == 1 })
	s := l.State()
	assert.EqualValues(t, 2, s.ItemsPoisoned)
	assert.EqualValues(t, 2, s.Retried, "two releases before item 7's last try")
	assert.Zero(t, s.Poisoned, "the batch message itself is not poisoned")
	assert.Equal(t, 3, c.callsOf(7), "item 7 had its three tries")
	assert.Equal(t, 1, c.callsOf(8), "a permanent failure is poisoned at once")
	waitFor(t, "blob deleted", func() bool { return blobGone(t, l.opts.Payloads.Store, sent.BatchID) })

	envs := poisonEnvelopes(t, q)
	require.Len(t, envs, 2)
	byItem := map[int]*PoisonEnvelope{}
	for _, e := range envs {
		byItem[e.Item] = e
		assert.Equal(t, sent.BatchID, e.Batch)
		assert.Equal(t, sent.ID, e.MessageID)
	}
	assert.Equal(t, `{"n":7}`, byItem[7].Body, "the envelope holds the item")
	assert.Contains(t, byItem[7].Reason, "failed 3 times")
	assert.Equal(t, `{"n":8}`, byItem[8].Body)

	// Requeue them (poisonEnvelopes consumed the queue: put them back
	// first) and they come back as single messages.
	for _, e := range envs {
		text, err := e.encode()
		require.NoError(t, err)
		_, err = q.PoisonQueue().Send(ctx, text, nil)
		require.NoError(t, err)
	}
	fixed.Store(true)
	res, err := Requeue(ctx, q.PoisonQueue(), q, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Moved)
	waitFor(t, "requeued items handled", func() bool { return l.State().Succeeded == 3 })
	require.NoError(t, stop())
	c.assertEachSucceededOnce(t, n, 0)
	assertSettled(t, l.State())
}

// A listener that stops mid-batch records what it completed and releases
// the batch; the next listener runs only the rest.
func TestBatchShutdownCheckpointsAndReleases(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	const n, fast = 200, 50
	sent := sendBatch(t, q, n, nil)
	c := newTally()
	cfg := quick()
	cfg.DrainTimeout = 100 * time.Millisecond
	var first atomic.Bool
	first.Store(true)
	l1, err := NewListener(q, c.handler(func(ctx context.Context, m *Message[job]) error {
		if m.Body.N >= fast && first.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}), cfg)
	require.NoError(t, err)
	stop := started(t, l1)
	waitFor(t, "fast items done", func() bool { return c.succeeded() == fast })
	require.NoError(t, stop())
	s1 := l1.State()
	assertSettled(t, s1)
	assert.EqualValues(t, 1, s1.Released)
	assert.EqualValues(t, 1, s1.Checkpoints)
	assert.Zero(t, s1.Failed, "cut off by the shutdown, not failed")
	meta, _, err := l1.opts.Payloads.Store.properties(context.Background(), sent.BatchID)
	require.NoError(t, err)
	assert.Equal(t, "0-49", meta.Done, "the checkpoint is on the blob")

	first.Store(false)
	l2, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error { return nil }), quick())
	require.NoError(t, err)
	stop2 := started(t, l2)
	waitFor(t, "batch done", func() bool { return l2.State().Succeeded == 1 })
	require.NoError(t, stop2())
	s2 := l2.State()
	assert.EqualValues(t, fast, s2.ItemsSkipped)
	assert.EqualValues(t, n-fast, s2.ItemsSucceeded)
	c.assertEachSucceededOnce(t, n, 0)
}

// A long batch checkpoints while it runs, so that a process that dies
// mid-batch loses at most CheckpointInterval of work; its items share the
// listener's Concurrency, and its visibility is renewed.
func TestBatchCheckpointsPeriodicallyAndRenewsWhileItRuns(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	// 20 rounds of 400 ms: 8 s, well past the first renewal (at 5 s) even
	// when a busy machine fires its timer late or the request is slow.
	const n = 40
	sent := sendBatch(t, q, n, nil)
	cfg := quick()
	cfg.Concurrency, cfg.Scaling.MaxDequeuers = 2, 1 // two items at a time
	// Long enough that a renewal delayed by a busy machine, or by one of
	// Azurite's clean-up stalls (seconds, about once a minute, longer the
	// more messages the suite has deleted), rarely lets the batch reappear.
	cfg.VisibilityTimeout = 10 * time.Second
	cfg.Payloads.CheckpointInterval = 500 * time.Millisecond
	var p peak
	c := newTally()
	l, err := NewListener(q, c.handler(p.sleeping(400*time.Millisecond)), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "a checkpoint while the batch runs", func() bool {
		meta, _, err := l.opts.Payloads.Store.properties(context.Background(), sent.BatchID)
		return err == nil && meta.Done != "" && l.State().Succeeded == 0
	})
	waitFor(t, "batch done", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	s := l.State()
	// If a stall held a renewal up past the visibility timeout all the
	// same, the batch was lost to its next delivery, which may start before
	// the lost one's last checkpoint is written: the items done since the
	// checkpoint before (about three, at two every 400 ms) and the two
	// running then run again, which at-least-once allows.
	c.assertEachSucceededOnce(t, n, 6*s.Lost)
	assert.LessOrEqual(t, p.most.Load(), int64(2), "items share the listener's MaxDequeuers × Concurrency")
	assert.GreaterOrEqual(t, s.Renewed, int64(1), "kept hidden while it ran")
	assert.GreaterOrEqual(t, s.Checkpoints, int64(1))
	assertSettled(t, s)
}

// Items of batches and single messages share the listener's handler
// calls: never more than MaxDequeuers × Concurrency at once.
func TestBatchItemsAndMessagesShareTheHandlerCap(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendBatch(t, q, 20, nil)   // jobs 0..19, as items
	sendJobRange(t, q, 20, 30) // jobs 20..29, as messages
	sendBatch(t, q, 10, nil)   // jobs 0..9 again, a second batch
	cfg := quick()
	cfg.Concurrency, cfg.Scaling.MaxDequeuers, cfg.Scaling.MinDequeuers = 2, 2, 2
	var p peak
	c := newTally()
	l, err := NewListener(q, c.handler(p.sleeping(50*time.Millisecond)), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "all handled", func() bool { s := l.State(); return s.Succeeded == 12 && s.ItemsSucceeded == 30 })
	require.NoError(t, stop())
	assert.LessOrEqual(t, p.most.Load(), int64(4), "at most MaxDequeuers × Concurrency handlers at once")
	assertSettled(t, l.State())
}

// The message is deleted before its blob. A failure between the two leaves a
// blob no message points at, which Sweep removes once the message's expiry
// has passed, and never before.
func TestBatchBlobLeftBehindIsSweptAfterItsMessageExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &faultTransport{fail: func(r *http.Request) bool {
		return r.Method == http.MethodDelete && !strings.Contains(r.URL.Path, "/messages/")
	}}
	acct := faultyAccount(t, f, 0)
	store, err := acct.PayloadStore(uniqueName(t))
	require.NoError(t, err)
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	const ttl = 3 * time.Second
	sent := sendBatch(t, q, 10, &PublisherOptions{Payloads: store, TTL: ttl})
	kept := sendBatch(t, q, 10, &PublisherOptions{Payloads: store}) // default TTL: its message lives on

	cfg := quick()
	cfg.Payloads.Store = store
	l, err := NewListener(q, func(_ context.Context, m *Message[job]) error {
		if m.BatchID == kept.BatchID {
			return Permanent(errors.New("keep this batch's item in the poison queue"))
		}
		return nil
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "both batches settled", func() bool { return l.State().Succeeded == 2 })
	require.NoError(t, stop())
	assert.Positive(t, f.hits.Load(), "the blob deletes failed")
	assert.Zero(t, depth(t, q), "the messages are gone")
	assert.False(t, blobGone(t, store, sent.BatchID), "the blob is left behind")

	clean := testAccount(t, nil)
	cstore, err := clean.PayloadStore(store.Container())
	require.NoError(t, err)
	res, err := Sweep(ctx, cstore, &SweepOptions{Grace: time.Millisecond})
	require.NoError(t, err)
	assert.Zero(t, res.Deleted, "not before its message could have expired")
	assert.Equal(t, 2, res.Live)

	time.Sleep(ttl + 1100*time.Millisecond) // metadata times have whole seconds
	res, err = Sweep(ctx, cstore, &SweepOptions{Grace: time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, SweepResult{Scanned: 2, Deleted: 1, Live: 1}, sweepCounts(res))
	assert.True(t, blobGone(t, cstore, sent.BatchID))
	assert.False(t, blobGone(t, cstore, kept.BatchID))

	// The default grace keeps even an expired payload for an hour.
	res, err = Sweep(ctx, cstore, nil)
	require.NoError(t, err)
	assert.Equal(t, SweepResult{Scanned: 1, Live: 1}, sweepCounts(res))
}

// A batch whose item handlers are slow still fits in a listener's memory:
// items are decoded one at a time as slots free up, never all at once.
//
// Not parallel: it reads the process's heap, which tests running alongside
// would add to.
func TestBatchOfManyLargeItemsRunsInBoundedMemory(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	store := q.PayloadStore()
	const items, size = 768, 64 << 10 // 48 MiB of item text
	w := payload.NewWriter(payload.Limits(defaultLimits(t)))
	item := strings.Repeat("x", size)
	for range items {
		require.NoError(t, w.Add(item))
	}
	data, err := w.Finish()
	require.NoError(t, err)
	p, err := store.put(ctx, payload.Meta{Kind: payload.KindBatch, Queue: q.Name(), Created: time.Now(), Expires: time.Now().Add(time.Hour), Items: items}, data)
	require.NoError(t, err)
	_, err = q.Send(ctx, p.Encode(), nil)
	require.NoError(t, err)
	t.Logf("%d MiB of items in a %d KiB blob", items*size>>20, len(data)>>10)

	var handled atomic.Int64
	cfg := quick()
	cfg.Codec = Raw()
	l, err := NewListener(q, func(_ context.Context, m *Message[string]) error {
		if len(m.Body) != size {
			return Permanent(errors.New("wrong item"))
		}
		handled.Add(1)
		return nil
	}, cfg)
	require.NoError(t, err)

	var peak atomic.Uint64
	var base uint64
	var ms runtimeMemStats
	base = ms.heapInUse()
	sampling, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for sampling.Err() == nil {
			if h := ms.heapInUse(); h > peak.Load() {
				peak.Store(h)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	stop := started(t, l)
	waitFor(t, "batch done", func() bool { return l.State().Succeeded == 1 })
	cancel()
	wg.Wait()
	require.NoError(t, stop())
	assert.EqualValues(t, items, handled.Load())
	grew := int64(peak.Load()) - int64(base)
	t.Logf("heap in use grew by at most %d MiB while handling %d MiB of items", grew>>20, items*size>>20)
	// Holding the items would take 48 MiB.
	assert.Less(t, grew, int64(24<<20))
}

// holdHandlerTokens takes every handler token of l, as the items of batches
// would, and returns a function that gives them back.
func holdHandlerTokens[T any](l *Listener[T]) (giveBack func()) {
	n := int64(l.opts.Scaling.MaxDequeuers * l.opts.Concurrency)
	if !l.handlers.TryAcquire(n) {
		panic("the listener's handler tokens are in use")
	}
	return func() { l.handlers.Release(n) }
}

// A message waiting for a handler token is kept hidden and is not failed by
// the wait: its HandlerTimeout starts when its handler does.
func TestWaitForAHandlerTokenIsNotAFailedTry(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	cfg := quick()
	cfg.HandlerTimeout = 200 * time.Millisecond
	cfg.MaxDequeueCount = 1 // a failed try would poison it
	c := newTally()
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error { return nil }), cfg)
	require.NoError(t, err)
	giveBack := holdHandlerTokens(l)
	stop := started(t, l)
	sendJobs(t, q, 1)
	waitFor(t, "received and waiting", func() bool { return l.State().InFlight == 1 })
	time.Sleep(3 * cfg.HandlerTimeout) // well past the timeout, still waiting
	assert.Zero(t, c.succeeded())
	giveBack()
	waitFor(t, "handled", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	s := l.State()
	assert.Zero(t, s.Failed)
	assert.Zero(t, s.Poisoned)
	c.assertEachSucceededOnce(t, 1, 0)
	assertSettled(t, s)
}

// At shutdown, a message still waiting for a handler token is made visible
// again at once, not held until the drain timeout nor started late.
func TestShutdownReleasesAMessageWaitingForAHandlerToken(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	cfg := quick()
	cfg.DrainTimeout = time.Hour
	c := newTally()
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error { return nil }), cfg)
	require.NoError(t, err)
	defer holdHandlerTokens(l)()
	stop := started(t, l)
	sendJobs(t, q, 1)
	waitFor(t, "received and waiting", func() bool { return l.State().InFlight == 1 })
	require.NoError(t, stop(), "Run returns without waiting for the drain timeout")
	s := l.State()
	// Released once, or twice if a receive under way as Run's context
	// ended brought it back after its release (and released it again).
	assert.GreaterOrEqual(t, s.Released, int64(1))
	assert.Zero(t, c.succeeded(), "never started")
	assertSettled(t, s)
	batch, err := q.Receive(context.Background(), 1, time.Minute)
	require.NoError(t, err)
	assert.Len(t, batch, 1, "visible again at once")
}

// At shutdown, a batch starts no further item: the items running finish, a
// checkpoint keeps them, and the batch is made visible again at once for
// another listener to run the rest.
func TestBatchShutdownStartsNoFurtherItem(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sent := sendBatch(t, q, 20, nil)
	cfg := quick()
	cfg.Concurrency, cfg.Scaling.MaxDequeuers = 2, 1 // two items at a time
	cfg.DrainTimeout = time.Hour
	gate := make(chan struct{})
	var entered atomic.Int64
	c := newTally()
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error {
		entered.Add(1)
		<-gate
		return nil
	}), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "two items running", func() bool { return entered.Load() == 2 })
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	waitFor(t, "shutdown begun", func() bool { return l.State().ActiveDequeuers == 0 })
	close(gate)
	require.NoError(t, <-stopped)

	s := l.State()
	assert.EqualValues(t, 2, entered.Load(), "no item started after the shutdown began")
	assert.EqualValues(t, 2, s.ItemsSucceeded)
	assert.EqualValues(t, 1, s.Released)
	assert.Zero(t, s.Retried)
	assertSettled(t, s)
	meta, _, err := l.opts.Payloads.Store.properties(context.Background(), sent.BatchID)
	require.NoError(t, err)
	assert.NotEmpty(t, meta.Done, "the running items are checkpointed")
	batch, err := q.Receive(context.Background(), 1, time.Minute)
	require.NoError(t, err)
	assert.Len(t, batch, 1, "visible again at once")
}

// A batch takes a key as a single message does: it lands on the key's
// shard, and its Sent describes the batch.
func TestAKeyedBatchLandsOnItsKeysShard(t *testing.T) {
	t.Parallel()
	acct := testAccount(t, nil)
	sq := shardedQueue(t, 3, nil, acct)
	store, err := acct.PayloadStore("")
	require.NoError(t, err)
	p, err := NewPublisher[job](sq, &PublisherOptions{Payloads: store})
	require.NoError(t, err)
	const key = "tenant-9"
	sent, err := p.SendBatch(context.Background(), jobs(4), &SendOptions{Key: key})
	require.NoError(t, err)
	assert.NotEmpty(t, sent.ID)
	assert.Equal(t, 4, sent.Items)
	assert.Len(t, sent.BatchID, payload.BlobIDLen)
	assert.Positive(t, sent.BatchBytes)
	assert.NotEmpty(t, sent.Token, "a batch can be cancelled")
	want := make([]int, 3)
	want[KeyShard(key, 3)] = 1
	assert.Equal(t, want, shardDepths(t, sq))
}
