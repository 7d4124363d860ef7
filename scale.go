package azdispatch

import (
	"sync"
	"time"
)

// ScaleFunc returns how many dequeuers a listener should run, given its state
// and the queue's approximate depth (messages, including those being
// handled). The listener keeps the result between MinDequeuers and
// MaxDequeuers, and only ever scales up on it: dequeuers scale down one by
// one, when the Idle hook tells an idle one to stop. It is called from one
// goroutine at a time.
type ScaleFunc func(s State, depth int) int

// ScaleByDepth returns the default ScaleFunc: one dequeuer for every perDequeuer
// messages waiting, rounded up. The listener uses its BatchSize, so that each
// dequeuer has a full batch to receive.
func ScaleByDepth(perDequeuer int) ScaleFunc {
	perDequeuer = max(perDequeuer, 1)
	return func(_ State, depth int) int {
		return (max(depth, 0) + perDequeuer - 1) / perDequeuer
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
}

// claimDepthRead reports whether the caller should read the depth now: at
// most one read per interval, and one at a time.
func (s *scaler) claimDepthRead(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reading || (!s.lastRead.IsZero() && now.Sub(s.lastRead) < s.interval) {
		return false
	}
	s.reading, s.lastRead = true, now
	return true
}

// readDone ends the read claimed by claimDepthRead.
func (s *scaler) readDone() {
	s.mu.Lock()
	s.reading = false
	s.mu.Unlock()
}

// target clamps a ScaleFunc's answer, and returns how many dequeuers to add
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
