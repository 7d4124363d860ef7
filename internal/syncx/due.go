package syncx

import (
	"container/heap"
	"sync"
	"time"
)

// maxDue bounds how many release times a DueTimes remembers.
const maxDue = 1024

// DueTimes remembers when messages a listener released for a retry become
// visible again, so that an idle dequeuer wakes for them instead of sleeping
// through to the end of its back-off. It costs no request: the times are
// known from the releases. The zero value is ready; it is safe for
// concurrent use.
type DueTimes struct {
	mu sync.Mutex
	h  timeHeap
}

// Add records that a message becomes visible at t. Past 1024 remembered
// times it forgets the new one: the idle back-off still finds the message,
// later.
func (d *DueTimes) Add(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.h) < maxDue {
		heap.Push(&d.h, t)
	}
}

// Limit shortens delay so that a dequeuer sleeping from now wakes at the
// earliest recorded time; each recorded time shortens one wait only. Times
// already past are dropped: the receive that just came back empty was made
// after them, or at about the same time.
func (d *DueTimes) Limit(now time.Time, delay time.Duration) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.h) > 0 && !d.h[0].After(now) {
		heap.Pop(&d.h)
	}
	if len(d.h) > 0 {
		if until := d.h[0].Sub(now); until < delay {
			heap.Pop(&d.h) // one wake-up per recorded time
			return until
		}
	}
	return delay
}

// timeHeap is a min-heap of times; its methods implement heap.Interface.
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }

// Pop removes the last element; heap.Pop has moved the earliest there.
func (h *timeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
