package azdispatch

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Against the emulator, a set over two queues of an account handles each
// message in its own queue: the good ones deleted there, the bad ones
// poisoned into their own queue's poison queue; the capped queue never has
// more than its cap in hand; and the set counts every message out again.
func TestQueueSetOverQueuesSettlesEachMessageInItsOwnQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := testQueue(t), testQueue(t)
	set, err := NewQueueSet("set", []SetMember{{Queue: a, Cap: 1}, {Queue: b}}, &QueueSetOptions{ShardedQueueOptions: loadedEmulator})
	require.NoError(t, err)
	for _, q := range []*Queue{a, b} {
		for _, text := range []string{`"ok"`, `"ok"`, `"bad"`, `"ok"`, `"bad"`} {
			_, err := q.Send(ctx, text, nil)
			require.NoError(t, err)
		}
	}
	var mu sync.Mutex
	running, peak := map[string]int{}, map[string]int{}
	h := func(ctx context.Context, m *Message[string]) error {
		mu.Lock()
		running[m.Queue]++
		peak[m.Queue] = max(peak[m.Queue], running[m.Queue])
		mu.Unlock()
		defer func() { mu.Lock(); running[m.Queue]--; mu.Unlock() }()
		if m.Body == "bad" {
			return Permanent(errors.New("bad"))
		}
		return nil
	}
	l, err := NewListener(set, h, quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "all settled", func() bool { s := l.State(); return s.Succeeded == 6 && s.Poisoned == 4 })
	require.NoError(t, stop())
	for _, q := range []*Queue{a, b} {
		assert.Zero(t, depth(t, q), q.Name())
		envs := poisonEnvelopes(t, q)
		require.Len(t, envs, 2, q.Name())
		for _, env := range envs {
			assert.Equal(t, "set", env.Queue, "the source, as for a sharded queue")
		}
	}
	mu.Lock()
	assert.Equal(t, 1, peak[a.Name()], "the capped queue's calls at once")
	mu.Unlock()
	for _, st := range set.State() {
		assert.Zero(t, st.InHand, st.Queue)
		assert.EqualValues(t, 5, st.Received, st.Queue)
		assert.True(t, st.Health.Healthy, st.Queue)
	}
}

// loadedEmulator gives each request to a queue of a set the time an
// emulator on a loaded machine may take (creating a queue, say): these
// tests do not mean a queue to time out.
var loadedEmulator = ShardedQueueOptions{TryTimeout: 30 * time.Second}

// countingHandler counts the log records whose message is msg.
type countingHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// A set found by prefix serves a queue created while its listener runs
// within a discovery interval, leaves poison queues out, and drops a queue
// deleted meanwhile at the next look, backed off until then rather than
// failing every receive.
func TestQueueSetDiscoversQueuesByPrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := uniqueName(t) + "-"
	createQueue(t, prefix+"a")
	createQueue(t, prefix+"a-poison")
	account := testAccount(t, nil)
	var backedOff atomic.Int64
	set, err := DiscoverQueueSet(ctx, "tenants", QueueDiscovery{Account: account, Prefix: prefix, Every: 300 * time.Millisecond},
		&QueueSetOptions{ShardedQueueOptions: ShardedQueueOptions{TryTimeout: loadedEmulator.TryTimeout, Logger: slog.New(countingHandler{"shard backed off", &backedOff})}})
	require.NoError(t, err)
	require.Equal(t, []string{prefix + "a"}, shardNames(set.Shards()))

	var handled sync.Map
	l, err := NewListener(set, func(ctx context.Context, m *Message[string]) error {
		handled.Store(m.Body, m.Queue)
		return nil
	}, quick())
	require.NoError(t, err)
	stop := started(t, l)
	a, err := account.Queue(prefix + "a")
	require.NoError(t, err)
	_, err = a.Send(ctx, `"first"`, nil)
	require.NoError(t, err)
	waitFor(t, "a's message handled", func() bool { _, ok := handled.Load("first"); return ok })

	createQueue(t, prefix+"b")
	b, err := account.Queue(prefix + "b")
	require.NoError(t, err)
	_, err = b.Send(ctx, `"second"`, nil)
	require.NoError(t, err)
	waitFor(t, "b's message handled", func() bool { q, ok := handled.Load("second"); return ok && q == prefix+"b" })

	_, err = a.client.Delete(ctx, nil)
	require.NoError(t, err)
	waitFor(t, "a dropped", func() bool { return slices.Equal(shardNames(set.Shards()), []string{prefix + "b"}) })
	_, err = b.Send(ctx, `"third"`, nil)
	require.NoError(t, err)
	waitFor(t, "b still served", func() bool { _, ok := handled.Load("third"); return ok })
	require.NoError(t, stop())
	assert.Zero(t, l.State().ReceiveErrors, "b answered every receive")
	assert.LessOrEqual(t, backedOff.Load(), int64(3), "back-offs of the deleted queue before it was dropped")
	assert.NoError(t, set.Degraded())
}

// shardNames are the names of shards, in order.
func shardNames(shards []Shard) []string {
	out := make([]string, len(shards))
	for i, s := range shards {
		out[i] = s.Name()
	}
	return out
}

// A set found by prefix whose last queue is deleted is not a fatal state:
// the receive that finds the queue gone has the next one list the queues
// again, without waiting for the interval, and the set, empty now, idles.
func TestQueueSetWhoseLastQueueIsDeletedIdles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := uniqueName(t) + "-"
	createQueue(t, prefix+"only")
	account := testAccount(t, nil)
	set, err := DiscoverQueueSet(ctx, "tenants", QueueDiscovery{Account: account, Prefix: prefix, Every: time.Hour}, &QueueSetOptions{ShardedQueueOptions: loadedEmulator})
	require.NoError(t, err)
	l, err := NewListener(set, func(context.Context, *Message[string]) error { return nil },
		&ListenerOptions{FatalTimeout: 1500 * time.Millisecond, Scaling: ScalingOptions{Idle: ExponentialIdle(0, 100*time.Millisecond)}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	q, err := account.Queue(prefix + "only")
	require.NoError(t, err)
	waitFor(t, "a receive", func() bool { return l.State().Transactions.Receive > 0 })
	_, err = q.client.Delete(ctx, nil)
	require.NoError(t, err)
	waitFor(t, "the queue dropped", func() bool { return len(set.Shards()) == 0 })
	select {
	case err := <-done:
		t.Fatalf("Run returned with the set's last queue deleted: %v", err)
	case <-time.After(3 * time.Second): // twice FatalTimeout
	}
	assert.NoError(t, l.Ready())
	stop()
	require.NoError(t, <-done)
}
