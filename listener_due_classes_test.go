package azdispatch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// Three listeners of one queue with two classes of keys, one inside the
// other: never more calls of a class at once among them than its Fleet (a
// key of the inner prefix counts in the inner class alone), while keys of
// no class run past both, and every message runs once.
func TestKeyClassesHoldAcrossListeners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New(queueNameOf(t), nil)
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	classes := []azdispatch.KeyClass{{Prefix: "pay/", Fleet: 2}, {Prefix: "pay/eu/", Fleet: 1}}
	keys := []string{"pay/us/1", "pay/us/2", "pay/eu/1", "pay/eu/2", "mail/1", "mail/2", "mail/3", ""}
	const each = 24
	for i := range each * len(keys) {
		k := keys[i%len(keys)]
		_, err := pub.SendWith(ctx, k, &azdispatch.SendOptions{Key: k})
		require.NoError(t, err)
	}
	classOf := func(key string) string {
		switch {
		case strings.HasPrefix(key, "pay/eu/"):
			return "pay/eu/"
		case strings.HasPrefix(key, "pay/"):
			return "pay/"
		}
		return "none"
	}
	var mu sync.Mutex
	inside, most, done := map[string]int{}, map[string]int{}, 0
	handler := func(_ context.Context, m *azdispatch.Message[string]) error {
		c := classOf(m.Key)
		mu.Lock()
		inside[c]++
		most[c] = max(most[c], inside[c])
		mu.Unlock()
		time.Sleep(3 * time.Millisecond)
		mu.Lock()
		inside[c]--
		done++
		mu.Unlock()
		return nil
	}
	var ls []*azdispatch.Listener[string]
	for range 3 {
		l, err := azdispatch.NewListener(q, handler, &azdispatch.ListenerOptions{
			Codec: azdispatch.Raw(), Concurrency: 8, Limits: azdispatch.LimitOptions{Classes: classes},
			Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MaxDequeuers: 1, BatchSize: 16},
		})
		require.NoError(t, err)
		ls = append(ls, l)
		stop := running(t, l)
		t.Cleanup(func() { require.NoError(t, stop()) })
	}
	// A message is settled after its handler returns: wait for both, or
	// InFlight read below can still hold the last one.
	waitUntil(t, "every message handled and settled", func() bool {
		mu.Lock()
		handled := done == each*len(keys)
		mu.Unlock()
		if !handled {
			return false
		}
		for _, l := range ls {
			if l.State().InFlight != 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	assert.LessOrEqual(t, most["pay/"], 2, "calls of the class pay/ at once")
	assert.LessOrEqual(t, most["pay/eu/"], 1, "calls of the class pay/eu/ at once")
	assert.Greater(t, most["none"], 2, "keys of no class are not held to a class's limit")
	var leases int64
	for _, l := range ls {
		s := l.State()
		assert.Zero(t, s.Poisoned)
		assert.Zero(t, s.InFlight)
		leases += s.Transactions.BlobLease
	}
	t.Logf("%d messages; at most at once: %v; %d Lease Blob requests", done, most, leases)
}

// Classes are checked when the listener is made.
func TestKeyClassesAreChecked(t *testing.T) {
	t.Parallel()
	q := memqueue.New(queueNameOf(t), nil)
	handler := func(context.Context, *azdispatch.Message[string]) error { return nil }
	many := make([]azdispatch.KeyClass, 65)
	for i := range many {
		many[i] = azdispatch.KeyClass{Prefix: fmt.Sprint(i, "/"), Fleet: 1}
	}
	for name, classes := range map[string][]azdispatch.KeyClass{
		"an empty prefix":      {{Prefix: "", Fleet: 1}},
		"a prefix twice":       {{Prefix: "a", Fleet: 1}, {Prefix: "a", Fleet: 2}},
		"a fleet of none":      {{Prefix: "a", Fleet: 0}},
		"a prefix too long":    {{Prefix: strings.Repeat("a", azdispatch.MaxKeyLength+1), Fleet: 1}},
		"more than 64 classes": many,
	} {
		_, err := azdispatch.NewListener(q, handler, &azdispatch.ListenerOptions{Limits: azdispatch.LimitOptions{Classes: classes}})
		var cfg *azdispatch.ConfigError
		require.ErrorAs(t, err, &cfg, name)
		assert.Contains(t, cfg.Field, "Limits.Classes", name)
	}
	// Only a Source's own methods: no payload store to offer.
	bare := struct{ azdispatch.Source }{q}
	_, err := azdispatch.NewListener(bare, handler, &azdispatch.ListenerOptions{Limits: azdispatch.LimitOptions{Classes: []azdispatch.KeyClass{{Prefix: "a", Fleet: 1}}}})
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
}

// A class at its limit, whose call hangs, does not fill the listener's
// slots: no more of it wait in hand than its Fleet, the rest are snoozed,
// and the other keys run meanwhile. Without that bound, the class's
// messages would take every slot the receives fill, one by one.
func TestABusyClassLeavesRoomForTheOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New(queueNameOf(t), nil)
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	for i := range 40 {
		k := fmt.Sprint("pay/", i)
		_, err := pub.SendWith(ctx, k, &azdispatch.SendOptions{Key: k})
		require.NoError(t, err)
	}
	release := make(chan struct{})
	var mu sync.Mutex
	others := 0
	handler := func(ctx context.Context, m *azdispatch.Message[string]) error {
		if strings.HasPrefix(m.Key, "pay/") {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
		mu.Lock()
		others++
		mu.Unlock()
		return nil
	}
	l, err := azdispatch.NewListener(q, handler, &azdispatch.ListenerOptions{
		Codec: azdispatch.Raw(), Concurrency: 4, HandlerTimeout: time.Minute,
		Limits:  azdispatch.LimitOptions{Classes: []azdispatch.KeyClass{{Prefix: "pay/", Fleet: 1}}},
		Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MaxDequeuers: 1, BatchSize: 4},
	})
	require.NoError(t, err)
	stop := running(t, l)
	t.Cleanup(func() { close(release); require.NoError(t, stop()) })
	waitUntil(t, "the class's first call under way, and the rest snoozed", func() bool { return l.State().Snoozed >= 10 })
	for i := range 20 {
		k := fmt.Sprint("mail/", i)
		_, err := pub.SendWith(ctx, k, &azdispatch.SendOptions{Key: k})
		require.NoError(t, err)
	}
	waitUntil(t, "the other keys handled while the class is at its limit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return others == 20
	})
	assert.LessOrEqual(t, l.State().InFlight, 2*4, "in hand: the class's call, one waiting for it, and the others")
}
