// Package latency keeps recent durations (times in queue, handler times)
// and summarizes them cheaply, and says how much concurrency a queue needs
// to keep its wait under a target.
package latency

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Size is how many of the latest samples a Window keeps.
const Size = 1024

// Span is how far back a Window's summary looks.
const Span = 5 * time.Minute

// Summary describes the samples of a Window.
type Summary struct {
	Count  int64 // samples added since the Window was made
	Recent int   // of them, those the figures below are over
	Mean   time.Duration
	P50    time.Duration
	P99    time.Duration
	Max    time.Duration
}

// Window keeps the latest [Size] durations and when each was added. Adding
// is a lock and two stores; a summary sorts at most Size values, and is
// kept until a sample is added or a second passes, so that frequent
// readers (an idle hook, a metrics scrape) cost little. The zero value is
// ready to use; it is safe for concurrent use.
type Window struct {
	mu    sync.Mutex
	vals  [Size]time.Duration
	at    [Size]int64 // Unix nanoseconds
	count int64

	cached   Summary
	cachedAt int64 // Unix nanoseconds; 0: none
}

// Add records d, measured at now.
func (w *Window) Add(now time.Time, d time.Duration) {
	w.mu.Lock()
	i := w.count % Size
	w.vals[i], w.at[i] = max(d, 0), now.UnixNano()
	w.count++
	w.cachedAt = 0
	w.mu.Unlock()
}

// Summary summarizes the samples added within [Span] of now. The values
// are copied under the lock and sorted outside it, so that adds (one per
// message) never wait for a sort.
func (w *Window) Summary(now time.Time) Summary {
	at := now.UnixNano()
	w.mu.Lock()
	if w.cachedAt != 0 && at >= w.cachedAt && at-w.cachedAt < int64(time.Second) {
		s := w.cached
		w.mu.Unlock()
		return s
	}
	since := at - int64(Span)
	var kept [Size]time.Duration
	n := 0
	for i := range int(min(w.count, Size)) {
		if w.at[i] >= since {
			kept[n] = w.vals[i]
			n++
		}
	}
	count := w.count
	w.mu.Unlock()

	s := Summary{Count: count, Recent: n}
	if n > 0 {
		recent := kept[:n]
		slices.Sort(recent)
		// In float: 1,024 waits of a few months each overflow a Duration.
		var sum float64
		for _, v := range recent {
			sum += float64(v)
		}
		s.Mean = time.Duration(sum / float64(n))
		s.P50 = recent[rank(n, 0.50)]
		s.P99 = recent[rank(n, 0.99)]
		s.Max = recent[n-1]
	}
	w.mu.Lock()
	if w.count == count { // nothing added meanwhile: still the summary
		w.cached, w.cachedAt = s, at
	}
	w.mu.Unlock()
	return s
}

// Busy is how many calls were under way at once, on average, over the
// span the window's samples cover (from the earliest within [Span] of now
// to now, at least a second): the sum of their durations over that span,
// Little's L for the calls measured. Zero without samples.
func (w *Window) Busy(now time.Time) float64 {
	at := now.UnixNano()
	since := at - int64(Span)
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum float64
	earliest := at
	for i := range int(min(w.count, Size)) {
		if w.at[i] >= since {
			sum += float64(w.vals[i])
			earliest = min(earliest, w.at[i]-int64(w.vals[i]))
		}
	}
	return sum / float64(max(at-earliest, int64(time.Second)))
}

// rank is the index of the q-quantile of n sorted values: the smallest
// value at or above which a share q of them lie (nearest rank).
func rank(n int, q float64) int {
	r := int(math.Ceil(q*float64(n))) - 1
	return min(max(r, 0), n-1)
}
