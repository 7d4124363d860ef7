package syncx

import (
	"sync"
	"sync/atomic"
)

// Tokens is a counting semaphore whose uncontended take and give are an
// atomic add or two: a listener takes one per handler call, and a
// channel's lock on every call would cost more than the bound is worth.
// Only a caller that finds none free waits, on a channel that the next give
// closes. It is safe for concurrent use.
type Tokens struct {
	max     int64
	taken   atomic.Int64 // may exceed max briefly, while a failed take backs out
	waiters atomic.Int64

	mu    sync.Mutex
	freed chan struct{} // closed, and replaced, by a give while someone waits
}

// NewTokens returns n free tokens.
func NewTokens(n int) *Tokens { return &Tokens{max: int64(n), freed: make(chan struct{})} }

// TryTake takes a token if one is free.
func (t *Tokens) TryTake() bool {
	if t.taken.Add(1) <= t.max {
		return true
	}
	t.Give()
	return false
}

// Take waits for a token until a or b is closed (a nil channel never is).
// It reports whether it took one.
func (t *Tokens) Take(a, b <-chan struct{}) bool {
	for {
		if t.TryTake() {
			return true
		}
		t.mu.Lock()
		t.waiters.Add(1)
		freed := t.freed
		t.mu.Unlock()
		// A give between the failed take and counting this waiter closed
		// nothing: look once more before waiting. (A give after it sees
		// the waiter and closes freed.)
		took := t.TryTake()
		ended := false
		if !took {
			select {
			case <-freed:
			case <-a:
				ended = true
			case <-b:
				ended = true
			}
		}
		t.waiters.Add(-1)
		if took || ended {
			return took
		}
	}
}

// Give returns a token.
func (t *Tokens) Give() {
	t.taken.Add(-1)
	if t.waiters.Load() == 0 {
		return
	}
	t.mu.Lock()
	close(t.freed)
	t.freed = make(chan struct{})
	t.mu.Unlock()
}
