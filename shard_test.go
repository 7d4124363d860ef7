package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/azurite"
	"github.com/azdispatch/azdispatch/internal/wire"
)

func TestShardedQueueSpreadsSendsAndListenerDrainsThroughOrigins(t *testing.T) {
	t.Parallel()
	sq := shardedQueue(t, 6, nil, threeAccounts(t)...)
	sendJobs(t, sq, 60)
	assert.Equal(t, []int{10, 10, 10, 10, 10, 10}, shardDepths(t, sq), "round-robin puts the same number on every shard")
	n, err := sq.Depth(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 60, n, "depth is the sum over shards")

	c := newTally()
	var queues sync.Map
	l, err := NewListener(sq, c.handler(func(_ context.Context, m *Message[job]) error {
		queues.Store(m.Queue, true)
		return nil
	}), quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "all handled", func() bool { return c.succeeded() == 60 })
	require.NoError(t, stop())
	s := l.State()
	assertSettled(t, s)
	c.assertEachSucceededOnce(t, 60, s.Lost)
	assert.Zero(t, s.Lost, "every delete went to the shard its message came from")
	assert.Equal(t, []int{0, 0, 0, 0, 0, 0}, shardDepths(t, sq))
	for _, sh := range sq.Shards() {
		_, ok := queues.Load(sh.Name())
		assert.True(t, ok, "messages of shard %s name it as their queue", sh.Name())
	}
}

func TestShardedQueueDeleteAndVisibilityGoToTheOrigin(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	sq := shardedQueue(t, 3, nil, a)
	sendJobs(t, sq, 3)
	ctx := context.Background()
	var got []*Delivery
	for len(got) < 3 {
		batch, err := sq.Receive(ctx, MaxBatch, 30*time.Second)
		require.NoError(t, err)
		got = append(got, batch...)
	}
	from := map[string]bool{}
	for _, d := range got {
		from[d.Queue] = true
	}
	assert.Len(t, from, 3, "one message from each shard")

	// A subset view shares the shards: it can settle what the whole set received.
	sub, err := sq.Subset(0, 1)
	require.NoError(t, err)
	require.NoError(t, sub.SetVisibility(ctx, got[0], 0))
	require.NoError(t, sq.Delete(ctx, got[0]))
	require.NoError(t, sub.Delete(ctx, got[1]))

	// Another sharded queue over the same shards is another set: it refuses.
	other, err := NewShardedQueue("other", sq.Shards(), nil)
	require.NoError(t, err)
	assert.ErrorContains(t, other.Delete(ctx, got[2]), "did not come from sharded queue")
	// The shard itself can delete it: the pop receipt is the shard's.
	shard := sq.Shards()[indexOfShard(sq, got[2].Queue)]
	require.NoError(t, shard.Delete(ctx, got[2]))

	n, err := sq.Depth(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Error(t, sq.Delete(ctx, &Delivery{ID: "x"}), "a delivery that came from no shard")
}

func indexOfShard(sq *ShardedQueue, name string) int {
	for i, sh := range sq.Shards() {
		if sh.Name() == name {
			return i
		}
	}
	return -1
}

func TestShardedQueueSkipsShardsThatWereJustEmpty(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	sq := shardedQueue(t, 5, &ShardedQueueOptions{EmptySkip: time.Hour}, a)
	require.NoError(t, sq.Create(context.Background()))
	busy := sq.Shards()[2].(*Queue)
	sendTexts(t, busy, 100, func(int) string { return "x" })
	ctx := context.Background()
	before := a.Transactions()
	got := 0
	calls := 0
	for got < 100 {
		batch, err := sq.Receive(ctx, 10, 30*time.Second)
		require.NoError(t, err)
		calls++
		for _, d := range batch {
			require.Equal(t, busy.Name(), d.Queue)
			require.NoError(t, sq.Delete(ctx, d))
		}
		got += len(batch)
	}
	tx := a.Transactions()
	empty := tx.EmptyReceive - before.EmptyReceive
	assert.LessOrEqual(t, empty, int64(4), "each empty shard is asked once, then skipped while the busy one has messages")
	assert.Equal(t, int64(10), tx.Receive-before.Receive-empty, "every other receive went to the busy shard")

	// Idle: every call makes one request, going round the shards.
	before = a.Transactions()
	var polled []int64
	for _, sh := range sq.Shards() {
		polled = append(polled, sh.(*Queue).Transactions().Receive)
	}
	for range 10 {
		batch, err := sq.Receive(ctx, 10, 30*time.Second)
		require.NoError(t, err)
		require.Empty(t, batch)
	}
	assert.Equal(t, int64(10), a.Transactions().Receive-before.Receive, "an idle sharded queue makes one request per receive")
	for i, sh := range sq.Shards() {
		assert.GreaterOrEqual(t, sh.(*Queue).Transactions().Receive-polled[i], int64(1), "shard %d is still looked at while idle", i)
	}
	sendTexts(t, sq.Shards()[4].(*Queue), 1, func(int) string { return "late" })
	var found []*Delivery
	for i := 0; i < 5 && len(found) == 0; i++ {
		found, _ = sq.Receive(ctx, 10, 30*time.Second)
	}
	require.Len(t, found, 1, "a message on any shard is found within one round of the shards")
}

// TestShardedQueueFillsAPartialBatchFromOtherShards checks that a receive
// that finds a few messages on one shard goes on to the shards that had
// messages, so a partial batch means the set, not one shard, is nearly
// empty; shards known to be empty are not asked.
func TestShardedQueueFillsAPartialBatchFromOtherShards(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	sq := shardedQueue(t, 4, &ShardedQueueOptions{EmptySkip: time.Hour}, a)
	ctx := context.Background()
	require.NoError(t, sq.Create(ctx))
	// One receive looks at every shard, none known yet: it learns that
	// shard 3 is empty and the others are not.
	for i, sh := range sq.Shards()[:3] {
		sendTexts(t, sh.(*Queue), 1, func(int) string { return fmt.Sprint("probe-", i) })
	}
	probes, err := sq.Receive(ctx, 32, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, probes, 3)
	for _, d := range probes {
		require.NoError(t, sq.Delete(ctx, d))
	}
	for _, sh := range sq.Shards()[:3] {
		sendTexts(t, sh.(*Queue), 5, func(int) string { return "x" })
	}
	sendTexts(t, sq.Shards()[3].(*Queue), 5, func(int) string { return "on the shard known to be empty" })

	before := a.Transactions()
	batch, err := sq.Receive(ctx, 32, 30*time.Second)
	require.NoError(t, err)
	assert.Len(t, batch, 15, "the three warm shards' messages in one call")
	tx := a.Transactions()
	assert.EqualValues(t, 3, tx.Receive-before.Receive, "one request per warm shard; the cold one is not asked")
	from := map[string]int{}
	for _, d := range batch {
		from[d.Queue]++
		require.NoError(t, sq.Delete(ctx, d), "each delete goes to its own shard")
	}
	assert.Len(t, from, 3)

	// A batch that fills up on the first shard asks no other.
	for _, sh := range sq.Shards()[:3] {
		sendTexts(t, sh.(*Queue), 5, func(int) string { return "y" })
	}
	before = a.Transactions()
	batch, err = sq.Receive(ctx, 2, 30*time.Second)
	require.NoError(t, err)
	assert.Len(t, batch, 2)
	assert.EqualValues(t, 1, a.Transactions().Receive-before.Receive)
}

// TestShardedQueueReturnsWhatItHoldsWhenAShardFailsMidGather checks that a
// receive that already holds messages returns them, without an error, when
// the next shard it asks fails, and that the failing shard is backed off.
func TestShardedQueueReturnsWhatItHoldsWhenAShardFailsMidGather(t *testing.T) {
	t.Parallel()
	base := uniqueName(t)
	f := &faultTransport{fail: func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/"+base+"-1/")
	}}
	f.next = newHTTPClient()
	shards, err := AccountShards(base, 3, testAccount(t, quickRetries(f)))
	require.NoError(t, err)
	sq, err := NewShardedQueue("tasks", shards, &ShardedQueueOptions{RetryMin: time.Minute, RetryMax: time.Minute})
	require.NoError(t, err)
	ctx := context.Background()
	for _, sh := range shards {
		sendTexts(t, sh.(*Queue), 2, func(int) string { return "x" })
	}
	batch, err := sq.Receive(ctx, 32, 30*time.Second)
	require.NoError(t, err, "messages in hand are returned, not an error")
	require.NotEmpty(t, batch)
	for _, d := range batch {
		assert.NotEqual(t, base+"-1", d.Queue)
		require.NoError(t, sq.Delete(ctx, d))
	}
	assert.False(t, sq.Health()[1].Healthy, "the failing shard is backed off")
	assert.Positive(t, f.hits.Load())
}

func TestShardedQueueRoutesAroundAThrottledShard(t *testing.T) {
	t.Parallel()
	base := uniqueName(t)
	var failing atomic.Bool
	failing.Store(true)
	f := &faultTransport{fail: func(r *http.Request) bool {
		return failing.Load() && strings.Contains(r.URL.Path, "/"+base+"-1")
	}}
	f.next = newHTTPClient()
	a := testAccount(t, quickRetries(f))
	shards, err := AccountShards(base, 3, a)
	require.NoError(t, err)
	sq, err := NewShardedQueue("tasks", shards, &ShardedQueueOptions{RetryMin: 300 * time.Millisecond, RetryMax: 500 * time.Millisecond})
	require.NoError(t, err)

	sendJobs(t, sq, 30)
	h := sq.Health()
	// A throttled shard is backed off for at most a second, which 30 sends
	// on a loaded machine may outlast: what it went through is checked,
	// not whether it is still backed off.
	assert.GreaterOrEqual(t, h[1].Failures, int64(1))
	var se *StorageError
	require.ErrorAs(t, h[1].LastError, &se)
	assert.Equal(t, "ServerBusy", se.Code)
	assert.True(t, h[0].Healthy && h[2].Healthy)
	assert.LessOrEqual(t, f.hits.Load(), int64(30), "the throttled shard is not asked at every send")

	// Keyed sends to it fail fast rather than move the key, while it is
	// backed off: make sure it is, with time to spare.
	key := keyFor(t, 1, 3)
	waitFor(t, "the shard backed off", func() bool {
		h := sq.Health()[1]
		if !h.Healthy && time.Until(h.RetryAt) > 300*time.Millisecond {
			return true
		}
		_, _ = sq.SendKeyed(context.Background(), key, "probe", nil) // fails, and backs it off again
		return false
	})
	hits := f.hits.Load()
	_, err = sq.SendKeyed(context.Background(), key, "k", nil)
	assert.ErrorIs(t, err, ErrNoHealthyShard)
	assert.Equal(t, hits, f.hits.Load(), "no request to a backed-off shard")

	// Once it recovers, it takes its share again.
	failing.Store(false)
	d := shardDepths(t, sq)
	assert.Zero(t, d[1], "nothing landed on the throttled shard")
	assert.Equal(t, 30, d[0]+d[2], "every send succeeded elsewhere")
	waitFor(t, "the shard takes sends again", func() bool {
		_, err := sq.Send(context.Background(), `{"n":-1}`, nil)
		require.NoError(t, err)
		return shardDepths(t, sq)[1] > 0
	})
	assert.True(t, sq.Health()[1].Healthy)
}

// keyFor finds a key that maps to shard i of n.
func keyFor(t testing.TB, i, n int) string {
	for k := range 10000 {
		key := "key-" + strings.Repeat("x", k%3) + string(rune('a'+k%26)) + strings.Repeat("y", k/26)
		if KeyShard(key, n) == i {
			return key
		}
	}
	t.Fatal("no key found")
	return ""
}

func TestShardedQueueFailsOnlyWhenEveryShardFails(t *testing.T) {
	t.Parallel()
	f := &faultTransport{fail: func(*http.Request) bool { return true }}
	f.next = newHTTPClient()
	sq := shardedQueue(t, 3, &ShardedQueueOptions{RetryMin: time.Minute, RetryMax: time.Minute}, testAccount(t, quickRetries(f)))
	ctx := context.Background()
	_, err := sq.Send(ctx, "x", nil)
	require.ErrorIs(t, err, ErrNoHealthyShard)
	var se *StorageError
	assert.ErrorAs(t, err, &se, "the shards' own errors are joined")
	hits := f.hits.Load()
	assert.Equal(t, int64(6), hits, "each shard tried once (with one SDK retry each)")

	_, err = sq.Send(ctx, "x", nil)
	assert.ErrorIs(t, err, ErrNoHealthyShard)
	assert.ErrorContains(t, err, "every shard is backed off")
	_, err = sq.Receive(ctx, 1, time.Second)
	assert.ErrorIs(t, err, ErrNoHealthyShard)
	_, err = sq.Depth(ctx)
	assert.ErrorIs(t, err, ErrNoHealthyShard)
	assert.Equal(t, hits, f.hits.Load(), "backed-off shards cost no request")

	_, err = sq.Send(ctx, strings.Repeat("x", serviceMessageLimit+1), nil)
	assert.ErrorIs(t, err, ErrMessageTooLarge, "a message error is not a shard failure")
}

func TestShardedQueueKeepsGoingWhenAnAccountDies(t *testing.T) {
	long(t)
	t.Parallel()
	ctx := context.Background()
	needStorage(t)
	doomed, err := azurite.Start(ctx, &azurite.Options{Fresh: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = doomed.Kill() })
	other, err := NewAccountFromConnectionString(doomed.ConnectionString(), quickRetries(nil))
	require.NoError(t, err)
	// Backed off for a minute, so that the end of the test still sees it.
	sq := shardedQueue(t, 4, &ShardedQueueOptions{RetryMin: time.Minute, RetryMax: time.Minute},
		testAccount(t, quickRetries(nil)), other)
	require.NoError(t, sq.Create(ctx))

	c := newTally()
	l, err := NewListener(sq, c.handler(func(context.Context, *Message[job]) error { return nil }), quick())
	require.NoError(t, err)
	stop := started(t, l)
	p, err := NewPublisher[job](sq, nil)
	require.NoError(t, err)
	for i := range 40 {
		_, err := p.Send(ctx, job{N: i})
		require.NoError(t, err)
	}
	waitFor(t, "the first 40 handled", func() bool { return c.succeeded() == 40 })

	require.NoError(t, doomed.Kill())
	for i := 40; i < 100; i++ {
		_, err := p.Send(ctx, job{N: i})
		require.NoError(t, err, "sends route around the dead account")
	}
	waitFor(t, "all 100 handled", func() bool { return c.succeeded() == 100 })
	require.NoError(t, stop())
	s := l.State()
	assertSettled(t, s)
	c.assertEachSucceededOnce(t, 100, s.Lost)
	for i, h := range sq.Health() {
		if i%2 == 1 {
			assert.False(t, h.Healthy, "shard %s of the dead account is backed off", h.Shard)
		} else {
			assert.True(t, h.Healthy, "shard %s is healthy", h.Shard)
		}
	}
}

func TestSendKeyedKeepsAKeyOnOneShard(t *testing.T) {
	t.Parallel()
	sq := shardedQueue(t, 4, nil, testAccount(t, nil))
	p, err := NewPublisher[job](sq, nil)
	require.NoError(t, err)
	for i := range 12 {
		_, err := p.SendKeyed(context.Background(), "customer-42", job{N: i})
		require.NoError(t, err)
	}
	want := make([]int, 4)
	want[KeyShard("customer-42", 4)] = 12
	assert.Equal(t, want, shardDepths(t, sq))

	plain, err := NewPublisher[job](testQueue(t), nil)
	require.NoError(t, err)
	_, err = plain.SendKeyed(context.Background(), "k", job{})
	require.NoError(t, err, "a plain queue carries the key, with no shard to choose")
	_, err = plain.SendKeyed(context.Background(), strings.Repeat("k", MaxKeyLength+1), job{})
	assert.ErrorIs(t, err, ErrInvalidConfig, "a key too long to carry")
}

func TestSubsetsReadDisjointShardsWithoutBouncing(t *testing.T) {
	t.Parallel()
	sq := shardedQueue(t, 6, nil, threeAccounts(t)...)
	p, err := NewPublisher[job](sq, nil)
	require.NoError(t, err)
	const n = 90
	for i := range n {
		_, err := p.SendKeyed(context.Background(), "k"+string(rune('a'+i%15)), job{N: i})
		require.NoError(t, err)
	}
	c := newTally()
	var mu sync.Mutex
	instanceOf := map[string]int{} // shard name → instance that read it
	var bounced atomic.Int64
	var stops []func() error
	for i := range 3 {
		sub, err := sq.Subset(i, 3)
		require.NoError(t, err)
		require.Len(t, sub.Shards(), 2)
		l, err := NewListener(sub, c.handler(func(_ context.Context, m *Message[job]) error {
			mu.Lock()
			defer mu.Unlock()
			if prev, ok := instanceOf[m.Queue]; ok && prev != i {
				bounced.Add(1)
			}
			instanceOf[m.Queue] = i
			if m.DequeueCount > 1 {
				bounced.Add(1)
			}
			return nil
		}), quick())
		require.NoError(t, err)
		stops = append(stops, started(t, l))
	}
	waitFor(t, "all handled", func() bool { return c.succeeded() == n })
	for _, stop := range stops {
		require.NoError(t, stop())
	}
	c.assertEachSucceededOnce(t, n, 0)
	assert.Zero(t, bounced.Load(), "each shard is read by one instance, each message once")
	for name, i := range instanceOf {
		assert.Equal(t, i, indexOfShard(sq, name)%3, "shard %s belongs to instance %d", name, i)
	}
	_, err = sq.Subset(6, 7)
	assert.ErrorIs(t, err, ErrInvalidConfig, "more instances than shards")
}

func TestShardedPoisonStaysBesideItsShardAndRequeues(t *testing.T) {
	t.Parallel()
	accts := threeAccounts(t)
	sq := shardedQueue(t, 3, nil, accts...)
	p, err := NewPublisher[job](sq, nil)
	require.NoError(t, err)
	keys := []string{keyFor(t, 0, 3), keyFor(t, 1, 3), keyFor(t, 2, 3)}
	for i := range 9 {
		_, err := p.SendKeyed(context.Background(), keys[i%3], job{N: i})
		require.NoError(t, err)
	}
	var poisonNow atomic.Bool
	poisonNow.Store(true)
	c := newTally()
	l, err := NewListener(sq, c.handler(func(_ context.Context, m *Message[job]) error {
		if poisonNow.Load() && m.Body.N%3 != 0 {
			return Permanent(assert.AnError)
		}
		return nil
	}), quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "3 handled, 6 poisoned", func() bool { s := l.State(); return s.Succeeded == 3 && s.Poisoned == 6 })
	require.NoError(t, stop())

	// Each poisoned message is beside the shard it came from.
	for i, sh := range sq.Shards() {
		n, err := sh.(*Queue).poisonQueue().Depth(context.Background())
		require.NoError(t, err)
		want := 3
		if i == 0 {
			want = 0 // keys[0]'s jobs are n%3 == 0: all succeeded
		}
		assert.Equal(t, want, n, "poison queue of shard %d", i)
	}

	// Requeue puts each back on its own shard.
	res, err := sq.Requeue(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, 6, res.Moved)
	assert.Equal(t, []int{0, 3, 3}, shardDepths(t, sq))

	// The same through the package's Requeue over the poison set.
	poisonNow.Store(true)
	l2, err := NewListener(sq, c.handler(func(context.Context, *Message[job]) error { return Permanent(assert.AnError) }), quick())
	require.NoError(t, err)
	stop = started(t, l2)
	waitFor(t, "6 poisoned again", func() bool { return l2.State().Poisoned == 6 })
	require.NoError(t, stop())
	res, err = Requeue(context.Background(), sq.poisonQueue(), sq, nil)
	require.NoError(t, err)
	assert.Equal(t, 6, res.Moved, "a receive from the poison set asks every shard")
	n, err := sq.Depth(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 6, n)
}

// The poison move routes by the delivery it gives up on, not by reading
// the envelope: any text goes beside the shard the delivery came through.
func TestShardedPoisonMoveRoutesByTheDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq := shardedQueue(t, 3, nil, testAccount(t, quickRetries(nil)))
	const key = "k"
	_, err := sq.SendKeyed(ctx, key, "x", nil)
	require.NoError(t, err)
	got, err := sq.Receive(ctx, 1, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, got, 1)

	poison := sq.poisonQueue()
	_, err = poison.sendBeside(ctx, got[0].Receipt, "not an envelope at all", nil)
	require.NoError(t, err)
	for i, sh := range sq.Shards() {
		want := 0
		if i == KeyShard(key, 3) {
			want = 1
		}
		assert.Equal(t, want, depth(t, sh.(*Queue).poisonQueue()), "poison queue of shard %d", i)
	}

	// A delivery from elsewhere is spread as any send is.
	_, err = poison.sendBeside(ctx, nil, "text", nil)
	require.NoError(t, err)
	n, err := poison.Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}

// A batch's items are poisoned beside its shard while its visibility is
// renewed on another goroutine: the poison move reads the delivery's
// receipt, which a renewal must not change under it (run with -race).
func TestShardedBatchItemsArePoisonedBesideTheirShardWhileRenewalsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	acct := testAccount(t, quickRetries(nil))
	sq := shardedQueue(t, 3, nil, acct)
	store, err := acct.PayloadStore("")
	require.NoError(t, err)
	p, err := NewPublisher[job](sq, &PublisherOptions{Payloads: store})
	require.NoError(t, err)
	items := make([]job, 8)
	for i := range items {
		items[i] = job{N: i}
	}
	_, err = p.SendBatch(ctx, items, nil)
	require.NoError(t, err)
	origin := -1
	for i, n := range shardDepths(t, sq) {
		if n == 1 {
			origin = i
		}
	}
	require.GreaterOrEqual(t, origin, 0)

	cfg := quick()
	cfg.Payloads.Store = store
	cfg.VisibilityTimeout = 2 * time.Second // renewed every second
	l, err := NewListener(sq, func(_ context.Context, m *Message[job]) error {
		if m.Body.N == 0 {
			time.Sleep(3 * time.Second) // keeps the batch, and its renewals, going
			return nil
		}
		time.Sleep(time.Duration(m.Body.N) * 300 * time.Millisecond)
		return Permanent(assert.AnError)
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "the batch done", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	s := l.State()
	assert.EqualValues(t, len(items)-1, s.ItemsPoisoned)
	assert.Positive(t, s.Renewed, "renewals ran while items were poisoned")
	for i, sh := range sq.Shards() {
		want := 0
		if i == origin {
			want = len(items) - 1
		}
		assert.Equal(t, want, depth(t, sh.(*Queue).poisonQueue()), "poison queue of shard %d", i)
	}
}

func TestShardedListenerIsWokenBySendsInTheSameProcess(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	name := uniqueName(t)
	shards, err := AccountShards(name, 4, a)
	require.NoError(t, err)
	sq, err := NewShardedQueue(name, shards, nil)
	require.NoError(t, err)
	require.NoError(t, sq.Create(context.Background()))
	c := newTally()
	cfg := quick()
	// After a partial batch (one shard's share) the listener waits as after
	// a first empty receive, briefly; from the second empty receive on, an hour.
	cfg.Scaling.Idle = func(s State, n int) (time.Duration, bool) {
		if n == 1 {
			return 100 * time.Millisecond, false
		}
		return atMaxBackOff(s, n)
	}
	l, err := NewListener(sq, c.handler(nil), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "at the hour-long back-off", func() bool {
		s := l.State()
		return s.IdleDequeuers == 1 && s.EmptyReceives >= 2
	})

	sendJobs(t, sq, 8) // round-robin over the 4 shards, each send a wake-up
	waitFor(t, "every job handled long before the back-off ends", func() bool { return c.succeeded() == 8 })
	require.NoError(t, stop())
	assertSettled(t, l.State())
}

// A sharded queue over accounts built from connection strings, with nothing
// else configured, offloads what does not fit a queue message through a
// payload store of its own (its first account's): a keyed send of a
// 100 KiB body, and of a Raw text that starts with the pointer prefix,
// arrive intact, and OnSent hears of both. (A sharded queue used to have no
// store, and such sends failed with an error that blamed the account.)
func TestShardedQueueOffloadsThroughAPayloadStoreOfItsOwn(t *testing.T) {
	t.Parallel()
	accts := threeAccounts(t)[:2]
	sq := shardedQueue(t, 4, nil, accts...)
	store := sq.PayloadStore()
	require.NotNil(t, store, "the first account's store")
	assert.Equal(t, DefaultPayloadContainer, store.Container())
	require.NotNil(t, sq.poisonQueue())
	assert.Same(t, store, sq.poisonQueue().PayloadStore(), "its poison queue shares it")

	var mu sync.Mutex
	var onSent []string
	p, err := NewPublisher[string](sq, &PublisherOptions{Codec: Raw(), OnSent: func(_ context.Context, id string) {
		mu.Lock()
		defer mu.Unlock()
		onSent = append(onSent, id)
	}})
	require.NoError(t, err)
	ctx := context.Background()
	bodies := []string{strings.Repeat("large body ", 100<<10/11), wire.PointerMagic + "a text, not a pointer"}
	var ids []string
	for _, b := range bodies {
		sent, err := p.SendKeyed(ctx, "customer-7", b)
		require.NoError(t, err)
		ids = append(ids, sent.ID)
	}
	mu.Lock()
	assert.Equal(t, ids, onSent)
	mu.Unlock()

	got := make(chan string, len(bodies))
	cfg := quick()
	cfg.Codec = Raw()
	l, err := NewListener(sq, func(_ context.Context, m *Message[string]) error {
		got <- m.Body
		return nil
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	var received []string
	for range bodies {
		select {
		case b := <-got:
			received = append(received, b)
		case <-time.After(time.Minute):
			t.Fatal("not received")
		}
	}
	require.NoError(t, stop())
	assert.ElementsMatch(t, bodies, received, "intact")
	assert.Zero(t, l.State().Poisoned)
}

// With no store to be had (shards of memqueue), an offloading send through
// a sharded queue says so, and names what to set.
func TestShardedQueueWithoutAStoreSaysWhatToSet(t *testing.T) {
	t.Parallel()
	sq, err := NewShardedQueue("bare", []Shard{&bareShard{name: "bare-0"}}, nil)
	require.NoError(t, err)
	assert.Nil(t, sq.PayloadStore())
	p, err := NewPublisher[string](sq, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	_, err = p.SendKeyed(context.Background(), "k", strings.Repeat("x", 100<<10))
	require.ErrorIs(t, err, ErrNoBlobService)
	assert.Contains(t, err.Error(), `bare has no payload store`)
	assert.Contains(t, err.Error(), "PublisherOptions.Payloads")
	assert.NotContains(t, err.Error(), "BlobServiceURL", "nothing about an account it does not have")
}

// bareShard is a shard with no payload store, which a send that needs one
// never reaches.
type bareShard struct{ name string }

func (b *bareShard) Name() string { return b.name }
func (b *bareShard) Send(context.Context, string, *SendOptions) (string, error) {
	return "", errors.New("not reached")
}
func (b *bareShard) Receive(context.Context, int, time.Duration) ([]*Delivery, error) {
	return nil, nil
}
func (b *bareShard) Delete(context.Context, *Delivery) error                       { return nil }
func (b *bareShard) SetVisibility(context.Context, *Delivery, time.Duration) error { return nil }
func (b *bareShard) Depth(context.Context) (int, error)                            { return 0, nil }
