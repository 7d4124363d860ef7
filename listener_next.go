package azdispatch

import (
	"time"

	"github.com/azdispatch/azdispatch/internal/backoff"
)

// afterReceive is what a dequeuer knows once a receive is over, all that
// its next step depends on (see nextStep).
type afterReceive struct {
	// asked is how many messages the receive asked for; got how many it
	// brought (kept, after a source that broke its contract).
	asked, got int
	// limited: the rate limit had turns for fewer messages than the
	// dequeuer had room for, and asked was cut to them.
	limited bool
	// noTurns: the rate limiter gives no turns at all, so nothing was
	// received.
	noTurns bool
	// err is the receive's error, if it failed (it may still have brought
	// messages); failures counts the failed receives in a row, this one
	// included.
	err      error
	failures int
	// stopping: Run's context has ended.
	stopping bool
	// idle is the dequeuer's streak of empty receives before this one.
	idle int
	// surplus: scaling to a target wait, more dequeuers run than the work
	// needs (see Listener.surplus). Read only after a receive that drained
	// the queue.
	surplus bool
	// jitter is a random number in [0, 1) for the failure back-off.
	jitter float64
}

// stepKind is what a dequeuer does after a receive.
type stepKind int

const (
	// stepStop: Run's context has ended; the dequeuer returns.
	stepStop stepKind = iota
	// stepReceive: receive again at once.
	stepReceive
	// stepScaleUp: a full batch; the queue may hold more than this
	// dequeuer can take: see whether more dequeuers are called for, then
	// receive again at once.
	stepScaleUp
	// stepBackOff: the receive failed; wait delay, then receive again.
	stepBackOff
	// stepPause: the rate limiter gives no turns; wait delay and look again.
	stepPause
	// stepWait: a partial batch took all there was; wait as after a first
	// empty receive (the Idle hook's delay for a streak of 1, not counted),
	// or until woken.
	stepWait
	// stepIdle: an empty receive; wait as the Idle hook says for the
	// streak idle (or stop, if it says so and the dequeuer may), or until
	// woken.
	stepIdle
)

// step is a dequeuer's next step after a receive.
type step struct {
	kind  stepKind
	delay time.Duration // stepBackOff, stepPause
	// idle is the dequeuer's streak of empty receives from now on.
	idle int
	// drained (stepIdle): the first empty receive of a streak; whatever
	// the last depth reading called for is met.
	drained bool
	// retire (stepWait, stepIdle): more dequeuers run than the work
	// needs; this one stops if the floor and the scale-up hold allow it.
	retire bool
}

// Back-off after failed receives: 250 ms doubling up to 30 s, or longer if
// the service says so (Retry-After: it knows how long it will be busy).
const (
	receiveRetryMin = 250 * time.Millisecond
	receiveRetryMax = 30 * time.Second
	// noTurnsLookEvery is how often a dequeuer looks again at a rate
	// limiter that gives no turns (a rate of 0 with its burst spent, or a
	// burst set to 0 after the listener was made).
	noTurnsLookEvery = time.Second
)

// nextStep decides what a dequeuer does after a receive. It is pure: the
// dequeuer gathers its inputs and carries out its answer.
func nextStep(r afterReceive) step {
	switch {
	case r.noTurns:
		return step{kind: stepPause, delay: noTurnsLookEvery, idle: r.idle}
	case r.err != nil:
		// A receive may bring messages and an error: those are handed out
		// all the same; the back-off is for the error.
		wait := hintedWait(r.err, backoff.Retry(receiveRetryMin, receiveRetryMax, int64(r.failures), r.jitter))
		return step{kind: stepBackOff, delay: wait, idle: r.idle}
	case r.stopping:
		return step{kind: stepStop, idle: r.idle}
	case r.got == r.asked && r.limited:
		// As many as the rate limit has turns for: more dequeuers would
		// only wait at the gate. Ask again (the gate waits for the next
		// turns).
		return step{kind: stepReceive}
	case r.got == r.asked:
		// A full batch, whether the first after a quiet spell or one of
		// many. (A partial batch took all there was: reading the depth then
		// would be a request spent to learn nothing.)
		return step{kind: stepScaleUp}
	case r.got > 0:
		// The queue had no more just now, so an immediate receive would
		// most likely come back empty.
		return step{kind: stepWait, retire: r.surplus}
	}
	idle := r.idle + 1
	return step{kind: stepIdle, idle: idle, drained: idle == 1, retire: r.surplus}
}
