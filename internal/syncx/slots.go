package syncx

import (
	"context"
	"sync"
)

// Slots bounds the messages a dequeuer holds at once: a listener has one set
// per dequeuer it may run, and a dequeuer that stops leaves its set, with
// the slots its messages still hold, to the next. A dequeuer takes slots
// before it receives and a message gives its slot back when it is settled,
// so nothing is received that no slot is free for. (A message may still
// wait, hidden and renewed, for one of the listener's handler tokens while
// the items of batches hold them all.) Slots are safe for concurrent use.
type Slots struct {
	mu   sync.Mutex
	free int
	// grew is signalled (without blocking) whenever slots are given back.
	// One waiter wakes; if it leaves enough for another, it signals again.
	grew chan struct{}
}

// NewSlots returns n free slots.
func NewSlots(n int) *Slots { return &Slots{free: n, grew: make(chan struct{}, 1)} }

// Take waits until at least atLeast slots are free, then takes up to most,
// and returns how many it took. It fails only when ctx ends, with ctx's
// error.
func (s *Slots) Take(ctx context.Context, atLeast, most int) (int, error) {
	for {
		if n, ok := s.TryTake(atLeast, most); ok {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.grew:
		}
	}
}

// TryTake takes up to most slots if at least atLeast are free, without
// waiting, and reports whether it took any.
func (s *Slots) TryTake(atLeast, most int) (int, bool) {
	s.mu.Lock()
	if s.free < atLeast {
		s.mu.Unlock()
		return 0, false
	}
	n := min(s.free, most)
	s.free -= n
	left := s.free
	s.mu.Unlock()
	if left >= atLeast {
		s.signal()
	}
	return n, true
}

// Give returns n slots; n <= 0 gives none.
func (s *Slots) Give(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.free += n
	s.mu.Unlock()
	s.signal()
}

// signal wakes one waiter, if any waits, without blocking.
func (s *Slots) signal() {
	select {
	case s.grew <- struct{}{}:
	default:
	}
}
