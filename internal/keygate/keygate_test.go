package keygate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestALineIsServedInOrderAndAFullOneRefuses(t *testing.T) {
	t.Parallel()
	g := New(1, 2)
	ctx := context.Background()
	o, waited, token := g.Enter(ctx, "k")
	require.Equal(t, In, o)
	assert.False(t, waited)
	assert.Nil(t, token, "a new place")

	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, waited, token := g.Enter(ctx, "k")
			assert.Equal(t, In, o)
			assert.True(t, waited)
			assert.Equal(t, "lease", token, "the place came with what the one before left")
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			g.Leave("k", token)
		}()
		// The second joins the line after the first.
		require.Eventually(t, func() bool { _, w := g.Counts(); return w == i+1 }, 5*time.Second, time.Millisecond)
	}
	o, _, _ = g.Enter(ctx, "k")
	assert.Equal(t, Full, o, "two wait already")
	o, _, _ = g.Enter(ctx, "other")
	assert.Equal(t, In, o, "another key is not held up")
	assert.False(t, g.Leave("other", nil))

	assert.True(t, g.Leave("k", "lease"), "handed on")
	wg.Wait()
	assert.Equal(t, []int{0, 1}, order)
	keys, waiting := g.Counts()
	assert.Zero(t, keys, "an idle key is forgotten")
	assert.Zero(t, waiting)
}

func TestAWaiterWhoseContextEndsLeavesTheLine(t *testing.T) {
	t.Parallel()
	g := New(1, 4)
	o, _, _ := g.Enter(context.Background(), "k")
	require.Equal(t, In, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Outcome)
	go func() { o, _, _ := g.Enter(ctx, "k"); done <- o }()
	require.Eventually(t, func() bool { _, w := g.Counts(); return w == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	assert.Equal(t, GaveUp, <-done)
	assert.False(t, g.Leave("k", "lease"), "no one waits: the lease is the caller's")
	keys, waiting := g.Counts()
	assert.Zero(t, keys+waiting)
}

func TestLeaveOfAKeyNotEnteredPanics(t *testing.T) {
	t.Parallel()
	assert.Panics(t, func() { New(1, 1).Leave("k", nil) })
}

// Many goroutines over few keys, some giving up while they wait: never more
// than the limit of a key inside at once, every one that got in left, and
// the gate ends empty.
func TestRandomizedNeverMoreThanTheLimitOfAKey(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for round := range 20 {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		limit, line, keys := 1+rng.IntN(3), rng.IntN(4), 1+rng.IntN(5)
		g := New(limit, line)
		inside := make([]atomic.Int32, keys)
		var wg sync.WaitGroup
		var refused, gaveUp, ran atomic.Int64
		for range 200 {
			k := rng.IntN(keys)
			hold := time.Duration(rng.IntN(200)) * time.Microsecond
			patience := time.Duration(rng.IntN(2000)) * time.Microsecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				defer cancel()
				name := fmt.Sprint("key", k)
				var o Outcome
				var token any
				if g.TryEnter(name) {
					o, token = In, fmt.Sprint("lease of ", name)
				} else {
					o, _, token = g.Enter(ctx, name)
				}
				switch o {
				case Full:
					refused.Add(1)
					return
				case GaveUp:
					gaveUp.Add(1)
					return
				}
				if n := inside[k].Add(1); n > int32(limit) {
					t.Errorf("round %d: %d of %s inside, limit %d", round, n, name, limit)
				}
				if token == nil {
					token = fmt.Sprint("lease of ", name)
				}
				if token != fmt.Sprint("lease of ", name) {
					t.Errorf("round %d: %s came with %v", round, name, token)
				}
				time.Sleep(hold)
				inside[k].Add(-1)
				ran.Add(1)
				g.Leave(name, token)
			}()
		}
		wg.Wait()
		require.Equal(t, int64(200), refused.Load()+gaveUp.Load()+ran.Load())
		k, w := g.Counts()
		require.Zero(t, k+w, "round %d: the gate ends empty", round)
	}
}
