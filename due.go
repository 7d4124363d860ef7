package azdispatch

import (
	"container/heap"
	"sync"
	"time"
)

// maxDue bounds how many release times a listener remembers.
const maxDue = 1024

// dueTimes remembers when messages this listener released for a retry become
// visible again, so that an idle dequeuer wakes for them instead of sleeping
// through to the end of its back-off. It costs no request: the times are
// known from the releases.
type dueTimes struct {
	mu sync.Mutex
	h  timeHeap
}

// add records that a message becomes visible at t. Past maxDue entries it
// forgets the new one: the idle back-off still finds the message, later.
func (d *dueTimes) add(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.h) < maxDue {
		heap.Push(&d.h, t)
	}
}

// limit shortens delay so that a dequeuer sleeping from now wakes at the
// earliest recorded time. Times already past are dropped: the receive that
// just came back empty was made after them, or at about the same time.
func (d *dueTimes) limit(now time.Time, delay time.Duration) time.Duration {
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

type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
