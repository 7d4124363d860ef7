// Package dequeue decides what a listener's receive loop (a dequeuer) does
// after each receive: receive again, scale up, back off, pause, wait, or go
// idle. The decision is a pure function of what the receive brought, so it
// is tested without storage, goroutines or a clock; the listener gathers
// the inputs and carries out the answer. [Scaler] keeps what scaling
// decisions remember between receives: depth reads and scale-ups.
package dequeue

import (
	"time"

	"github.com/azdispatch/azdispatch/internal/backoff"
)

// After is what a dequeuer knows once a receive is over, all that its
// next step depends on (see Next).
type After struct {
	// Asked is how many messages the receive asked for; Got how many it
	// brought (kept, after a source that broke its contract).
	Asked, Got int
	// Limited: the rate limit had turns for fewer messages than the
	// dequeuer had room for, and asked was cut to them.
	Limited bool
	// Held: the source held messages back (a queue set's queue at its
	// cap), so a partial batch does not mean there were no more.
	Held bool
	// NoTurns: the rate limiter gives no turns at all, so nothing was
	// received.
	NoTurns bool
	// Failed: the receive failed (it may still have brought messages);
	// RetryAfter is how long the service asked to wait, if it said;
	// Failures counts the failed receives in a row, this one included.
	Failed     bool
	RetryAfter time.Duration
	Failures   int
	// Stopping: Run's context has ended.
	Stopping bool
	// Idle is the dequeuer's streak of empty receives before this one.
	Idle int
	// Surplus: scaling to a target wait, more dequeuers run than the work
	// needs (as the handlers' recent load says). Read only after a receive
	// that drained the queue.
	Surplus bool
	// Jitter is a random number in [0, 1) for the failure back-off.
	Jitter float64
}

// Kind is what a dequeuer does after a receive.
type Kind int

const (
	// Stop: Run's context has ended; the dequeuer returns.
	Stop Kind = iota
	// Receive: receive again at once.
	Receive
	// ScaleUp: a full batch; the queue may hold more than this
	// dequeuer can take: see whether more dequeuers are called for, then
	// receive again at once.
	ScaleUp
	// BackOff: the receive failed; wait delay, then receive again.
	BackOff
	// Pause: the rate limiter gives no turns; wait delay and look again.
	Pause
	// Wait: a partial batch took all there was; wait as after a first
	// empty receive (the Idle hook's delay for a streak of 1, not counted),
	// or until woken.
	Wait
	// Idle: an empty receive; wait as the Idle hook says for the
	// streak idle (or stop, if it says so and the dequeuer may), or until
	// woken.
	Idle
)

// Step is a dequeuer's next step after a receive.
type Step struct {
	Kind  Kind
	Delay time.Duration // BackOff, Pause
	// Idle is the dequeuer's streak of empty receives from now on.
	Idle int
	// Drained (Idle): the first empty receive of a streak; whatever the
	// last depth reading called for is met.
	Drained bool
	// Retire (Wait, Idle): more dequeuers run than the work needs; this
	// one stops if the floor and the scale-up hold allow it.
	Retire bool
}

// Back-off after failed receives: 250 ms doubling up to 30 s, or longer if
// the service says so (Retry-After: it knows how long it will be busy).
const (
	RetryMin = 250 * time.Millisecond
	RetryMax = 30 * time.Second
	// NoTurnsLookEvery is how often a dequeuer looks again at a rate
	// limiter that gives no turns (a rate of 0 with its burst spent, or a
	// burst set to 0 after the listener was made).
	NoTurnsLookEvery = time.Second
)

// Next decides what a dequeuer does after a receive. It is pure: the
// dequeuer gathers its inputs and carries out its answer.
func Next(r After) Step {
	switch {
	case r.NoTurns:
		return Step{Kind: Pause, Delay: NoTurnsLookEvery, Idle: r.Idle}
	case r.Failed:
		// A receive may bring messages and an error: those are handed out
		// all the same; the back-off is for the error.
		wait := max(r.RetryAfter, backoff.Retry(RetryMin, RetryMax, int64(r.Failures), r.Jitter))
		return Step{Kind: BackOff, Delay: wait, Idle: r.Idle}
	case r.Stopping:
		return Step{Kind: Stop, Idle: r.Idle}
	case r.Got == r.Asked && r.Limited:
		// As many as the rate limit has turns for: more dequeuers would
		// only wait at the gate. Ask again (the gate waits for the next
		// turns).
		return Step{Kind: Receive}
	case r.Got == r.Asked:
		// A full batch, whether the first after a quiet spell or one of
		// many. (A partial batch took all there was: reading the depth then
		// would be a request spent to learn nothing.)
		return Step{Kind: ScaleUp}
	case r.Got > 0 && r.Held:
		// Fewer because a queue is at its cap, not because there were
		// no more: ask again (the next receive waits for free slots, and
		// the set for room under the cap).
		return Step{Kind: Receive}
	case r.Got > 0:
		// The queue had no more just now, so an immediate receive would
		// most likely come back empty.
		return Step{Kind: Wait, Retire: r.Surplus}
	}
	idle := r.Idle + 1
	return Step{Kind: Idle, Idle: idle, Drained: idle == 1, Retire: r.Surplus}
}
