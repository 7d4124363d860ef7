// Package backoff holds the delay curves of the dispatcher's back-offs: the
// randomized exponential wait of an idle poller, and the jittered exponential
// delay before a failed message's next try (also the time a circuit breaker
// stays open). The curves take their random draws as arguments, so that they
// are pure functions and their tests need no randomness.
package backoff

import (
	"math"
	"time"
)

// IdleStep is δ of the idle curve: the step the exponential grows from.
const IdleStep = 100 * time.Millisecond

// Idle is the randomized exponential back-off for empty queues: after the
// idleCount-th empty receive in a row it waits
//
//	min(minIdle + (2^idleCount − 1)·U[0.8δ, 1.2δ], maxIdle), δ = IdleStep,
//
// and at the cap it still draws from [0.8·maxIdle, maxIdle], so that the idle
// pollers of a fleet do not line up. The draws u, v are in [0, 1): u picks
// the step's jitter, v the jitter at the cap. It reports whether the cap was
// reached. An idleCount below 1 waits minIdle.
func Idle(minIdle, maxIdle time.Duration, idleCount int, u, v float64) (d time.Duration, capped bool) {
	if idleCount < 1 {
		return minIdle, false
	}
	step := float64(IdleStep) * (0.8 + 0.4*u)
	// The exponent stops at 62: past it the curve is far above any cap.
	grown := float64(minIdle) + (math.Exp2(float64(min(idleCount, 62)))-1)*step
	if grown < float64(maxIdle) {
		return time.Duration(grown), false
	}
	return time.Duration(float64(maxIdle) * (0.8 + 0.2*v)), true
}

// Retry is the delay after the n-th failed try (n below 1 counts as 1):
// base·2^(n−1), capped at maxDelay, with ±20% jitter from the draw u in
// [0, 1), so that messages that failed together do not come back together.
// The jitter never takes it above maxDelay.
func Retry(base, maxDelay time.Duration, n int64, u float64) time.Duration {
	n = min(max(n, 1), 62)
	d := float64(base) * math.Exp2(float64(n-1))
	d = math.Min(d, float64(maxDelay)) * (0.8 + 0.4*u)
	return time.Duration(math.Min(d, float64(maxDelay)))
}
