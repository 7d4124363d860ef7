package azdispatch

import (
	"math"
	"math/rand/v2"
	"time"
)

// IdleFunc is asked by a dequeuer after each receive that found nothing, with
// the listener's state and how many empty receives in a row this dequeuer has
// made (1 on the first); after a receive that returned fewer messages than it
// asked for, it is asked with 1, since the queue had no more just then. It
// returns how long to wait before the next receive, and whether this dequeuer
// may stop. The listener honours stop only above its floor (State.MinDequeuers)
// and not within ScaleInterval of a scale-up. A wake-up ends the wait early and
// starts the count again, as does any message found. It is called from several
// goroutines at once.
type IdleFunc func(s State, idleCount int) (delay time.Duration, stop bool)

// RetryFunc returns how long a message whose handler failed stays hidden
// before its next try, given its dequeue count (1 after the first try).
type RetryFunc func(dequeueCount int64) time.Duration

// idleDelta is δ of the idle curve: the step the exponential grows from.
const idleDelta = 100 * time.Millisecond

// ExponentialIdle returns the randomized exponential back-off for empty
// queues: after the n-th empty receive in a row it waits
//
//	min(minIdle + (2^n − 1)·U[0.8δ, 1.2δ], maxIdle), δ = 100 ms,
//
// and at the cap it still draws from [0.8·maxIdle, maxIdle], so that the idle
// pollers of a fleet do not line up. It says stop once the curve has reached
// maxIdle and this is not the last dequeuer the listener keeps (more are
// active than State.MinDequeuers, which is 1 unless configured otherwise).
func ExponentialIdle(minIdle, maxIdle time.Duration) IdleFunc {
	return exponentialIdle(minIdle, maxIdle, rand.Float64)
}

// exponentialIdle is ExponentialIdle drawing its jitter from random.
func exponentialIdle(minIdle, maxIdle time.Duration, random func() float64) IdleFunc {
	return func(s State, idleCount int) (time.Duration, bool) {
		d, capped := idleDelay(minIdle, maxIdle, idleCount, random(), random())
		return d, capped && s.ActiveDequeuers > s.MinDequeuers
	}
}

// idleDelay is the curve of ExponentialIdle for draws u, v in [0, 1): u picks
// the step's jitter, v the jitter at the cap. It reports whether the cap was reached.
func idleDelay(minIdle, maxIdle time.Duration, idleCount int, u, v float64) (time.Duration, bool) {
	if idleCount < 1 {
		return minIdle, false
	}
	step := float64(idleDelta) * (0.8 + 0.4*u)
	grown := float64(minIdle) + (math.Exp2(float64(min(idleCount, 62)))-1)*step
	if grown < float64(maxIdle) {
		return time.Duration(grown), false
	}
	return time.Duration(float64(maxIdle) * (0.8 + 0.2*v)), true
}

// ExponentialRetry returns a RetryFunc that waits base·2^(n−1) after the n-th
// failed try, capped at maxDelay, with ±20% jitter so that messages that failed
// together do not come back together.
func ExponentialRetry(base, maxDelay time.Duration) RetryFunc {
	return func(dequeueCount int64) time.Duration {
		return retryDelay(base, maxDelay, dequeueCount, rand.Float64())
	}
}

// retryDelay is the curve of ExponentialRetry for a draw u in [0, 1).
func retryDelay(base, maxDelay time.Duration, dequeueCount int64, u float64) time.Duration {
	n := min(max(dequeueCount, 1), 62)
	d := float64(base) * math.Exp2(float64(n-1))
	d = math.Min(d, float64(maxDelay)) * (0.8 + 0.4*u)
	return time.Duration(math.Min(d, float64(maxDelay)))
}
