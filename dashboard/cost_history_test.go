package dashboard

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// Samples taken at once, by requests whose clocks disagree, line up in the
// order their counts were read, each no earlier than the one before: a
// window's first sample never holds more than its last, so no share of it
// is negative.
func TestCostSamplesTakenAtOnceStayInOrder(t *testing.T) {
	t.Parallel()
	var h costHistory
	var counted atomic.Int64
	read := func() costSample {
		n := counted.Add(1)
		return costSample{all: azdispatch.Transactions{Depth: 2 * n}, own: azdispatch.Transactions{Depth: n}}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				// Each request's time, read before it samples, up to a
				// second either way of the others'.
				h.sample(start.Add(time.Duration(rng.IntN(2000))*time.Millisecond), read)
			}
		})
	}
	wg.Wait()
	require.Len(t, h.samples, 1600, "all within the window")
	for i := 1; i < len(h.samples); i++ {
		prev, s := h.samples[i-1], h.samples[i]
		assert.False(t, s.at.Before(prev.at), "sample %d is earlier than the one before", i)
		own, all := shares(prev, s)
		assert.Equal(t, int64(1), own.Depth, "sample %d", i)
		assert.GreaterOrEqual(t, all.Depth, own.Depth, "sample %d", i)
	}
}
