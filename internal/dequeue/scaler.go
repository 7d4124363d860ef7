package dequeue

import (
	"sync"
	"time"
)

// Scaler holds the scaling decisions that need memory: when the depth was
// last read, and when the listener last scaled up. It takes the clock from
// its caller, so that tests can drive it. It is safe for concurrent use.
type Scaler struct {
	Interval   time.Duration // between depth reads, and the hold after a scale-up
	Min, Max   int
	mu         sync.Mutex
	reading    bool      // a depth read is under way
	lastRead   time.Time // when the last depth read started
	lastScaled time.Time // when the listener last scaled up
	overMax    bool      // the last answer asked for more than max
	// fullSince counts the full receives since the last depth read or
	// scale-up: each says the queue held at least a batch more.
	fullSince int
}

// Full records a full receive made while active dequeuers run, when the
// depth may not be read yet (see ClaimDepthRead), and reports whether to
// add a dequeuer: once as many full receives as dequeuers have come back
// since the last reading or scale-up, so that a burst that comes between
// two depth readings is met within a round of receives, rather than after
// the rest of the interval, at no cost in requests; it marks a scale-up at
// now. A queue whose receives come back full keeps its dequeuers growing,
// one a round, up to max; one that drains lets them go as usual.
func (s *Scaler) Full(now time.Time, active int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fullSince++
	if s.fullSince < active || active >= s.Max {
		return false
	}
	s.fullSince = 0
	s.lastScaled = now
	return true
}

// Drained records that a receive found the queue empty: a target out of
// reach at the last reading is within it now.
func (s *Scaler) Drained() {
	s.mu.Lock()
	s.overMax = false
	s.mu.Unlock()
}

// Unmet reports whether want, a scaling function's answer, asks for more than
// max when the answer before did not (or a receive found the queue empty
// since): the moment a target falls out of reach.
func (s *Scaler) Unmet(want int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.overMax
	s.overMax = want > s.Max
	return s.overMax && !was
}

// ClaimDepthRead reports whether the caller should read the depth now: at
// most one read per interval, and one at a time.
func (s *Scaler) ClaimDepthRead(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reading || (!s.lastRead.IsZero() && now.Sub(s.lastRead) < s.Interval) {
		return false
	}
	s.reading, s.lastRead, s.fullSince = true, now, 0
	return true
}

// ReadDone ends the read claimed by ClaimDepthRead.
func (s *Scaler) ReadDone() {
	s.mu.Lock()
	s.reading = false
	s.mu.Unlock()
}

// Target clamps a scaling function's answer, and returns how many dequeuers to add
// to the active ones. A positive answer marks a scale-up at now.
func (s *Scaler) Target(now time.Time, want, active int) int {
	want = min(max(want, s.Min, 1), s.Max)
	if want <= active {
		return 0
	}
	s.mu.Lock()
	s.lastScaled = now
	s.mu.Unlock()
	return want - active
}

// MayRetire reports whether an idle dequeuer may stop now: not while the
// fleet is within one interval of a scale-up, so that a burst that has just
// been met does not lose its dequeuers to the first empty receive.
func (s *Scaler) MayRetire(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastScaled.IsZero() || now.Sub(s.lastScaled) >= s.Interval
}
