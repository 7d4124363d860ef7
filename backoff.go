package azdispatch

import (
	"math/rand/v2"
	"time"

	"github.com/azdispatch/azdispatch/internal/backoff"
)

// IdleFunc is asked by a dequeuer after each receive that found nothing, with
// the listener's state and how many empty receives in a row this dequeuer has
// made (1 on the first); after a receive that returned fewer messages than it
// asked for, it is asked with 1, since the queue had no more just then. It
// returns how long to wait before the next receive, and whether this dequeuer
// may stop. The listener honours stop only while more dequeuers run than its
// floor (MinDequeuers, or none with PushOnly), and not within ScaleInterval
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

// exponentialIdle is ExponentialIdle drawing its jitter from random.
func exponentialIdle(minIdle, maxIdle time.Duration, random func() float64) IdleFunc {
	return func(_ State, idleCount int) (time.Duration, bool) {
		return backoff.Idle(minIdle, maxIdle, idleCount, random(), random())
	}
}

// ExponentialRetry returns a RetryFunc that waits base·2^(n−1) after the n-th
// failed try, capped at maxDelay, with ±20% jitter so that messages that failed
// together do not come back together.
func ExponentialRetry(base, maxDelay time.Duration) RetryFunc {
	return func(dequeueCount int64) time.Duration {
		return backoff.Retry(base, maxDelay, dequeueCount, rand.Float64())
	}
}
