package latency

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSummaryOfKnownSamples(t *testing.T) {
	var w Window
	now := time.Unix(1_700_000_000, 0)
	for i := 1; i <= 100; i++ {
		w.Add(now, time.Duration(i)*time.Second)
	}
	s := w.Summary(now)
	assert.Equal(t, Summary{Count: 100, Recent: 100, Mean: 50500 * time.Millisecond, P50: 50 * time.Second, P99: 99 * time.Second, Max: 100 * time.Second}, s)
}

func TestSummaryLooksOnlyAtTheLatestWithinTheSpan(t *testing.T) {
	var w Window
	now := time.Unix(1_700_000_000, 0)
	for range Size {
		w.Add(now, time.Hour) // pushed out by what follows
	}
	for range Size {
		w.Add(now.Add(time.Minute), time.Second)
	}
	s := w.Summary(now.Add(time.Minute))
	assert.Equal(t, int64(2*Size), s.Count)
	assert.Equal(t, Size, s.Recent)
	assert.Equal(t, time.Second, s.Max)

	later := now.Add(time.Minute + Span + time.Second)
	s = w.Summary(later)
	assert.Zero(t, s.Recent, "older than the span")
	assert.Zero(t, s.Max)
	assert.Equal(t, int64(2*Size), s.Count, "the count is of every sample")
}

// Waits of months add up past what a Duration holds: the mean does not
// overflow.
func TestMeanOfLongWaits(t *testing.T) {
	var w Window
	now := time.Unix(1_700_000_000, 0)
	for range Size {
		w.Add(now, 150*24*time.Hour)
	}
	assert.Equal(t, 150*24*time.Hour, w.Summary(now).Mean)
}

func TestEmptyWindow(t *testing.T) {
	var w Window
	assert.Equal(t, Summary{}, w.Summary(time.Now()))
}

// Random samples against a sort of all of them: the percentiles are the
// nearest ranks, and a negative sample counts as zero.
func TestSummaryAgainstASortRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for range 200 {
		var w Window
		now := time.Unix(1_700_000_000, 0)
		n := 1 + r.IntN(Size)
		all := make([]time.Duration, n)
		for i := range all {
			d := time.Duration(r.Int64N(int64(time.Hour))) - time.Minute
			w.Add(now, d)
			all[i] = max(d, 0)
		}
		slices.Sort(all)
		s := w.Summary(now)
		require.Equal(t, n, s.Recent)
		assert.Equal(t, all[(n+1)/2-1], s.P50, "n=%d", n)
		assert.Equal(t, all[len(all)-1], s.Max)
		assert.LessOrEqual(t, s.P50, s.P99)
		assert.LessOrEqual(t, s.P99, s.Max)
		below := 0
		for _, v := range all {
			if v <= s.P99 {
				below++
			}
		}
		assert.GreaterOrEqual(t, float64(below), 0.99*float64(n))
	}
}

func TestSummaryIsKeptForASecondUnlessASampleComes(t *testing.T) {
	var w Window
	now := time.Unix(1_700_000_000, 0)
	w.Add(now, time.Second)
	first := w.Summary(now)
	assert.Equal(t, first, w.Summary(now.Add(500*time.Millisecond)))
	w.Add(now, 3*time.Second)
	assert.Equal(t, 2*time.Second, w.Summary(now.Add(500*time.Millisecond)).Mean)
}

func TestConcurrentAddsAndSummaries(t *testing.T) {
	var w Window
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				w.Add(time.Now(), time.Duration(g*i))
				if i%100 == 0 {
					w.Summary(time.Now())
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(4000), w.Summary(time.Now()).Count)
}

// Busy is the calls under way at once on average: ten calls of 2 s each
// over the 10 s since the first began keep two busy.
func TestBusyIsLittlesL(t *testing.T) {
	var w Window
	start := time.Unix(1_700_000_000, 0)
	for i := range 10 {
		end := start.Add(time.Duration(i+2) * time.Second) // began at start+i
		w.Add(end, 2*time.Second)
	}
	assert.InDelta(t, 20.0/11.0, w.Busy(start.Add(11*time.Second)), 1e-9, "20 s of calls over the 11 s from the first's start")
	assert.Zero(t, (&Window{}).Busy(start))
}
