package syncx

import "sync"

// Subscribers is a set of wake callbacks: the subscribers of something that
// tells when work was sent. The zero value is ready; it is safe for
// concurrent use.
type Subscribers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

// Subscribe registers wake, to be called (quickly, without blocking) on
// every Wake; cancel removes it. Calling cancel more than once is harmless.
func (s *Subscribers) Subscribe(wake func()) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = make(map[int]func())
	}
	id := s.next
	s.next++
	s.fns[id] = wake
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}
}

// Wake calls every subscriber once. The callbacks run outside the lock, so
// that one may subscribe or cancel; one cancelled during a Wake may still be
// called by it.
func (s *Subscribers) Wake() {
	s.mu.Lock()
	fns := make([]func(), 0, len(s.fns))
	for _, f := range s.fns {
		fns = append(fns, f)
	}
	s.mu.Unlock()
	for _, f := range fns {
		f()
	}
}
