package syncx

import (
	"container/heap"
	"sync"
	"time"
)

// maxDue bounds how many times a DueTimes remembers.
const maxDue = 1024

// DueTimes remembers when messages a listener let go of become visible
// again (released for a retry, or left hidden by a delete, a release or a
// receive that failed), so that the listener looks for them then instead
// of sleeping through to the end of its back-off, and a listener with no
// dequeuer left starts one. It costs no request: the times are known from
// the listener's own requests.
//
// A time is forgotten only once a receive that started after it found the
// queue drained (it returned fewer messages than it asked for): every
// message due by then was visible to it. A dequeuer that wakes for a time
// and finds a full batch receives again at once, and so comes back round.
//
// One waiter is sent to each time (see Limit): a listener whose idle
// dequeuers all woke for every time would make a receive per dequeuer for
// each message released for a retry, and all but one would come back empty.
//
// The zero value is ready; it is safe for concurrent use.
type DueTimes struct {
	mu      sync.Mutex
	h       timeHeap
	changed chan struct{} // has a value when the earliest time changed
	// sent is the time a waiter was last sent to (see Limit); zero once a
	// receive has covered it.
	sent time.Time
}

// staleSend is how long past the time a waiter was sent to another may be
// sent instead: the first may have stopped on its way.
const staleSend = time.Second

// Add records that a message becomes visible at t. Past 1024 times it
// keeps a time at or after every one it was given, so that each message
// is still looked for, if later, and it keeps the near times exact at the
// cost of the far ones: a t past the latest replaces it; a t before it
// takes the place of the second latest, whose messages are then looked
// for at the latest. (Messages hidden for days, such as a delayed
// message's hops, must not crowd out a retry due in a second.)
func (d *DueTimes) Add(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.h) < maxDue {
		heap.Push(&d.h, t)
	} else if last := d.h.latest(); t.After(d.h[last]) {
		d.h[last] = t
		heap.Fix(&d.h, last)
	} else {
		// The latest stays; the one before it goes, and t comes in.
		latest := d.h[last]
		heap.Remove(&d.h, last)
		second := d.h.latest()
		d.h[second] = latest
		heap.Fix(&d.h, second)
		heap.Push(&d.h, t)
	}
	if d.h[0].Equal(t) {
		d.signal()
	}
}

// Covered forgets the times at or before start, when a receive that
// started then returned fewer messages than it asked for.
func (d *DueTimes) Covered(start time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.h) > 0 && !d.h[0].After(start) {
		heap.Pop(&d.h)
	}
	if !d.sent.IsZero() && !d.sent.After(start) {
		d.sent = time.Time{}
	}
}

// Next returns the earliest time remembered, if any.
func (d *DueTimes) Next() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.h) == 0 {
		return time.Time{}, false
	}
	return d.h[0], true
}

// Limit shortens a wait of delay from now so that it ends at the earliest
// time remembered (a time already past shortens it to nothing), unless a
// waiter has been sent to that time, or to an earlier one, already: that
// one looks, and, if it finds the queue drained before the time, comes back
// for it. A waiter still not back a second after the time it was sent to is
// taken to have stopped on its way, and another is sent.
//
// held is the time the caller was sent to by its last call, zero if none: a
// waiter that comes back before its time (woken) is sent again. Limit
// returns the wait, and the time the caller is sent to now, zero if none;
// a caller that stops waiting for good gives it to Release.
func (d *DueTimes) Limit(now time.Time, delay time.Duration, held time.Time) (time.Duration, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.h) == 0 {
		return delay, time.Time{}
	}
	next := d.h[0]
	wait := next.Sub(now)
	if wait >= delay {
		if !held.IsZero() && d.sent.Equal(held) {
			d.sent = time.Time{} // its own wait ends first: no longer on its way
		}
		return delay, time.Time{}
	}
	mine := !held.IsZero() && d.sent.Equal(held)
	going := !d.sent.IsZero() && !d.sent.After(next) && now.Before(d.sent.Add(staleSend))
	if going && !mine {
		return delay, time.Time{}
	}
	d.sent = next
	return max(wait, 0), next
}

// Release tells that the waiter sent to held (see Limit) will not go: one
// may be sent in its place at once.
func (d *DueTimes) Release(held time.Time) {
	if held.IsZero() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent.Equal(held) {
		d.sent = time.Time{}
	}
}

// Changed returns a channel that has a value once the earliest time
// remembered has changed: for a goroutine that waits for it.
func (d *DueTimes) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.changed == nil {
		d.changed = make(chan struct{}, 1)
	}
	return d.changed
}

// signal tells the goroutine waiting on Changed. The caller holds d.mu.
func (d *DueTimes) signal() {
	if d.changed == nil {
		d.changed = make(chan struct{}, 1)
	}
	select {
	case d.changed <- struct{}{}:
	default: // it has been told already
	}
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

// latest returns the index of the latest time, which is one of the leaves;
// 0 for an empty heap.
func (h timeHeap) latest() int {
	at := len(h) / 2
	for i := at + 1; i < len(h); i++ {
		if h[i].After(h[at]) {
			at = i
		}
	}
	return at
}
