package azdispatch

import (
	"context"
	"sync"
)

// slots bounds the messages a dequeuer holds at once. A dequeuer takes slots
// before it receives and a message gives its slot back when it is settled,
// so nothing is received that no slot is free for. (A message may still wait,
// hidden and renewed, for one of the listener's handler tokens while the
// items of batches hold them all.)
type slots struct {
	mu   sync.Mutex
	free int
	// grew is signalled (without blocking) whenever slots are given back.
	// One waiter wakes; if it leaves enough for another, it signals again.
	grew chan struct{}
}

func newSlots(n int) *slots { return &slots{free: n, grew: make(chan struct{}, 1)} }

// take waits until at least atLeast slots are free, then takes up to most.
// It fails only when ctx ends.
func (s *slots) take(ctx context.Context, atLeast, most int) (int, error) {
	for {
		s.mu.Lock()
		if s.free >= atLeast {
			n := min(s.free, most)
			s.free -= n
			left := s.free
			s.mu.Unlock()
			if left >= atLeast {
				s.signal()
			}
			return n, nil
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.grew:
		}
	}
}

// give returns n slots.
func (s *slots) give(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.free += n
	s.mu.Unlock()
	s.signal()
}

func (s *slots) signal() {
	select {
	case s.grew <- struct{}{}:
	default:
	}
}
