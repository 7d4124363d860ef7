package azdispatch

import "sync"

// WakeSource tells its subscribers that work was sent. A *Queue is one: it
// calls them after every successful Send through it in this process. A
// WakeHandler is one for wake-ups from other processes.
type WakeSource interface {
	// Subscribe registers wake, to be called (quickly, without blocking)
	// whenever work is sent; cancel removes it.
	Subscribe(wake func()) (cancel func())
}

// subscribers is a set of wake callbacks; the zero value is ready.
type subscribers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

// Subscribe implements WakeSource.
func (s *subscribers) Subscribe(wake func()) (cancel func()) {
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

// wake calls every subscriber.
func (s *subscribers) wake() {
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

// signal is a broadcast that can be waited on repeatedly: every Notify closes
// the current channel and opens a new one. A dequeuer that takes the channel
// before it receives learns of a wake-up that came during the receive, which
// waiting on a channel taken afterwards would miss.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

// current returns the channel the next broadcast closes.
func (s *signal) current() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// broadcast wakes everyone waiting on the current channel.
func (s *signal) broadcast() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}
