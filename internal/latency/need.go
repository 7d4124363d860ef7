package latency

import (
	"math"
	"time"
)

// Load is what a listener knows of its queue when it scales to a target
// time in queue.
type Load struct {
	Rate    float64       // messages arriving per second
	Handler time.Duration // a handler call's mean time
	Backlog int           // messages waiting to be received
	Waited  time.Duration // the recent 99th percentile of time in queue
	Active  int           // dequeuers running
}

// Shape is how a listener runs its handlers.
type Shape struct {
	Target      time.Duration // the time in queue to stay under
	PerDequeuer int           // handler calls one dequeuer runs at once
	Batch       int           // messages one receive brings at most
}

// Dequeuers is how many dequeuers keep the wait under s.Target. By
// Little's law (L = λW) a queue whose messages arrive at λ a second and
// take h to handle keeps λ·h handler calls busy; a backlog of b is
// received within the target at b/target a second more. Those calls,
// spread over dequeuers of PerDequeuer each, are the answer, but never
// fewer dequeuers than one per Batch of the backlog (a dequeuer receives
// at most one batch a round trip, whatever its handlers take), and one
// more than are running while the observed wait is over the target and
// more messages wait than the running dequeuers hold: the estimate then
// falls short of what the queue shows. (Not while fewer wait: the wait is
// a recent percentile, and one late spell would otherwise add a dequeuer
// at every reading for minutes.)
func Dequeuers(l Load, s Shape) int {
	if s.Target <= 0 || s.PerDequeuer < 1 || s.Batch < 1 {
		return 0
	}
	rate := max(l.Rate, 0) + float64(max(l.Backlog, 0))/s.Target.Seconds()
	busy := rate * max(l.Handler, 0).Seconds()
	n := int(math.Ceil(busy / float64(s.PerDequeuer)))
	n = max(n, (max(l.Backlog, 0)+s.Batch-1)/s.Batch)
	if l.Waited > s.Target && l.Backlog > l.Active*s.PerDequeuer {
		n = max(n, l.Active+1)
	}
	return n
}

// Rate estimates the arrival rate from two readings of a queue: what was
// received between them, and how its depth changed. Arrivals either were
// received or are still in the queue, so a depth that grew adds to what
// was received, and one that shrank takes from it. It is never negative;
// zero when the readings are not apart in time.
func Rate(received int64, depthChange int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return max(float64(received+int64(depthChange))/elapsed.Seconds(), 0)
}
