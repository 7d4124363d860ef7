package syncx

import "sync"

// Signal is a broadcast that can be waited on repeatedly: every Broadcast
// closes the current channel and opens a new one. A dequeuer that takes the
// channel before it receives learns of a wake-up that came during the
// receive, which waiting on a channel taken afterwards would miss. It is
// safe for concurrent use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewSignal returns a Signal no one has broadcast on yet.
func NewSignal() *Signal { return &Signal{ch: make(chan struct{})} }

// Current returns the channel the next Broadcast closes.
func (s *Signal) Current() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// Broadcast wakes everyone waiting on the current channel.
func (s *Signal) Broadcast() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}
