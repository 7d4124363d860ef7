package azdispatch

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch/internal/backoff"
	"github.com/azdispatch/azdispatch/internal/latency"
)

// IdleFunc is asked by a dequeuer after each receive that found nothing, with
// the listener's state and how many empty receives in a row this dequeuer has
// made (1 on the first); after a receive that returned fewer messages than it
// asked for, it is asked with 1, since the queue had no more just then. It
// returns how long to wait before the next receive, and whether this dequeuer
// may stop. The listener honours stop only while more dequeuers run than its
// floor ([ScalingOptions.MinDequeuers], or none with
// [ScalingOptions.PushOnly]), and not within [ScalingOptions.ScaleInterval]
// of a scale-up. A wake-up ends the wait early and starts the count again, as
// does any message found. It is called from several goroutines at once.
type IdleFunc func(s State, idleCount int) (delay time.Duration, stop bool)

// RetryFunc returns how long a message whose handler failed stays hidden
// before its next try, given its dequeue count (1 after the first try).
type RetryFunc func(dequeueCount int64) time.Duration

// ExponentialIdle returns the randomized exponential back-off for empty
// queues that Microsoft's whitepaper "Best Practices for Maximizing
// Scalability and Cost Effectiveness of Queue-Based Messaging Solutions on
// Windows Azure" recommends: after the n-th empty receive in a row it waits
//
//	min(minIdle + (2^n − 1)·U[0.8δ, 1.2δ], maxIdle), δ = 100 ms,
//
// and at the cap it still draws from [0.8·maxIdle, maxIdle], so that the idle
// pollers of a fleet do not line up. It says stop once the curve has reached
// maxIdle; the listener keeps its floor of dequeuers whatever it says.
func ExponentialIdle(minIdle, maxIdle time.Duration) IdleFunc {
	return exponentialIdle(minIdle, maxIdle, rand.Float64)
}

// exponentialIdle is [ExponentialIdle] drawing its jitter from random.
func exponentialIdle(minIdle, maxIdle time.Duration, random func() float64) IdleFunc {
	return func(_ State, idleCount int) (time.Duration, bool) {
		return backoff.Idle(minIdle, maxIdle, idleCount, random(), random())
	}
}

// ExponentialRetry returns a [RetryFunc] that waits base·2^(n−1) after the n-th
// failed try, capped at maxDelay, with ±20% jitter so that messages that failed
// together do not come back together.
func ExponentialRetry(base, maxDelay time.Duration) RetryFunc {
	return func(dequeueCount int64) time.Duration {
		return backoff.Retry(base, maxDelay, dequeueCount, rand.Float64())
	}
}

// ScaleFunc returns how many dequeuers a listener should run, given its state
// and the queue's approximate depth (messages, including those being
// handled). The listener keeps the result between
// [ScalingOptions.MinDequeuers] and [ScalingOptions.MaxDequeuers], and only
// ever scales up on it: dequeuers scale down one by one, when the
// [ScalingOptions.Idle] hook tells an idle one to stop. It is called from one
// goroutine at a time.
type ScaleFunc func(s State, depth int) int

// ScaleByDepth returns the default [ScaleFunc]: one dequeuer for every perDequeuer
// messages waiting, rounded up. The listener uses its
// [ScalingOptions.BatchSize], so that each dequeuer has a full batch to
// receive.
func ScaleByDepth(perDequeuer int) ScaleFunc {
	perDequeuer = max(perDequeuer, 1)
	return func(_ State, depth int) int {
		return (max(depth, 0) + perDequeuer - 1) / perDequeuer
	}
}

// ScaleToWait returns a [ScaleFunc] that keeps messages' time in queue
// under target, for a listener that runs perDequeuer handler calls per
// dequeuer ([ListenerOptions.Concurrency]) and receives up to batch
// messages at once ([ScalingOptions.BatchSize]); [ScalingOptions.TargetWait]
// sets it up. By Little's law, messages arriving at λ a second that take h
// to handle keep λ·h handler calls busy, and a backlog of b is received
// within the target at b/target a second more: it asks for the dequeuers
// those calls need, from the arrival rate (what the listener received
// between two readings, and how the depth changed), the recent mean
// handler time ([State.HandlerTime]) and the backlog (the depth less the
// messages in hand). It never asks for fewer than one dequeuer per batch
// waiting, and while the recent 99th percentile of time in queue is over
// the target with more messages waiting than the running dequeuers hold,
// it asks for one more than run. With [ScalingOptions.TargetWait], a
// dequeuer whose receive drains the queue also stops while more run than
// the handlers' recent load needs, with a quarter more for headroom. Each
// ScaleFunc it returns keeps the readings it was given: give each
// listener its own.
//
// The depth counts hidden messages too (delayed ones, and those waiting
// for a retry), which it takes for a backlog: a queue that holds much
// delayed work reads as behind, and asks for more dequeuers than it needs.
// For batches, the handler time is an item's and the rate is of messages:
// it then asks for fewer than it needs.
func ScaleToWait(target time.Duration, perDequeuer, batch int) ScaleFunc {
	shape := latency.Shape{Target: target, PerDequeuer: perDequeuer, Batch: batch}
	var last struct {
		at       time.Time
		received int64
		depth    int
		rate     float64
	}
	return func(s State, depth int) int {
		now := time.Now()
		if !last.at.IsZero() {
			r := latency.Rate(s.Received-last.received, depth-last.depth, now.Sub(last.at))
			// Half the new reading, half what came before: one burst
			// does not set the rate for the next interval alone.
			last.rate = (last.rate + r) / 2
		}
		last.at, last.received, last.depth = now, s.Received, depth
		return latency.Dequeuers(latency.Load{
			Rate: last.rate, Handler: s.HandlerTime.Mean, Backlog: max(depth-s.InFlight, 0),
			Waited: s.TimeInQueue.P99, Active: s.ActiveDequeuers,
		}, shape)
	}
}

// scaler holds the scaling decisions that need memory: when the depth was
// last read, and when the listener last scaled up. It takes the clock from
// its caller, so that tests can drive it. It is safe for concurrent use.
type scaler struct {
	interval   time.Duration // between depth reads, and the hold after a scale-up
	min, max   int
	mu         sync.Mutex
	reading    bool      // a depth read is under way
	lastRead   time.Time // when the last depth read started
	lastScaled time.Time // when the listener last scaled up
	overMax    bool      // the last answer asked for more than max
	// fullSince counts the full receives since the last depth read or
	// scale-up: each says the queue held at least a batch more.
	fullSince int
}

// full records a full receive made while active dequeuers run, when the
// depth may not be read yet (see claimDepthRead), and reports whether to
// add a dequeuer: once as many full receives as dequeuers have come back
// since the last reading or scale-up, so that a burst that comes between
// two depth readings is met within a round of receives, rather than after
// the rest of the interval, at no cost in requests; it marks a scale-up at
// now. A queue whose receives come back full keeps its dequeuers growing,
// one a round, up to max; one that drains lets them go as usual.
func (s *scaler) full(now time.Time, active int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fullSince++
	if s.fullSince < active || active >= s.max {
		return false
	}
	s.fullSince = 0
	s.lastScaled = now
	return true
}

// drained records that a receive found the queue empty: a target out of
// reach at the last reading is within it now.
func (s *scaler) drained() {
	s.mu.Lock()
	s.overMax = false
	s.mu.Unlock()
}

// unmet reports whether want, a ScaleFunc's answer, asks for more than
// max when the answer before did not (or a receive found the queue empty
// since): the moment a target falls out of reach.
func (s *scaler) unmet(want int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.overMax
	s.overMax = want > s.max
	return s.overMax && !was
}

// claimDepthRead reports whether the caller should read the depth now: at
// most one read per interval, and one at a time.
func (s *scaler) claimDepthRead(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reading || (!s.lastRead.IsZero() && now.Sub(s.lastRead) < s.interval) {
		return false
	}
	s.reading, s.lastRead, s.fullSince = true, now, 0
	return true
}

// readDone ends the read claimed by claimDepthRead.
func (s *scaler) readDone() {
	s.mu.Lock()
	s.reading = false
	s.mu.Unlock()
}

// target clamps a [ScaleFunc]'s answer, and returns how many dequeuers to add
// to the active ones. A positive answer marks a scale-up at now.
func (s *scaler) target(now time.Time, want, active int) int {
	want = min(max(want, s.min, 1), s.max)
	if want <= active {
		return 0
	}
	s.mu.Lock()
	s.lastScaled = now
	s.mu.Unlock()
	return want - active
}

// mayRetire reports whether an idle dequeuer may stop now: not while the
// fleet is within one interval of a scale-up, so that a burst that has just
// been met does not lose its dequeuers to the first empty receive.
func (s *scaler) mayRetire(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastScaled.IsZero() || now.Sub(s.lastScaled) >= s.interval
}
