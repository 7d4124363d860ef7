// Package keygate limits how many messages of one key a process runs at
// once. A message whose key is at its limit waits in line, first come
// first served, and is let in by the one that leaves before it; the line
// of a key is bounded, and one that finds it full is told so at once, so
// that its caller can put it back rather than hold it.
//
// A place may carry a token that goes with it from the one that leaves to
// the one it lets in: a lease that holds the key across processes, say,
// kept rather than given up and taken again.
package keygate

import (
	"context"
	"sync"
)

// Gate is the limit of every key. The zero value is not usable; make one
// with [New]. It is safe for concurrent use.
type Gate struct {
	limit, line int

	mu   sync.Mutex
	keys map[string]*key
}

// key is one key's state: how many of its messages run, and the line of
// those waiting, oldest first. A key with none of either is forgotten.
type key struct {
	running int
	waiting []*waiter
}

// waiter is one message in line: in is closed when it is let in, with the
// token of the place it takes.
type waiter struct {
	in    chan struct{}
	token any
}

// New returns a gate that lets limit messages of a key in at once (at
// least 1) and keeps at most line more of them waiting (0: none wait).
func New(limit, line int) *Gate {
	return &Gate{limit: max(limit, 1), line: max(line, 0), keys: make(map[string]*key)}
}

// Outcome is what Enter did.
type Outcome int

const (
	// In: the message may run; Leave must follow.
	In Outcome = iota
	// Full: the key is at its limit and its line is full: the message
	// did not wait.
	Full
	// GaveUp: ctx ended while the message waited; it is not in.
	GaveUp
)

// Enter lets a message of key k in, at once or after it waited in line
// until one of its key left, or ctx ended. waited says whether it had to
// wait; token is what the place it took carries: nil for a new place, or
// what the one that let it in left. One let in as ctx ended is in.
func (g *Gate) Enter(ctx context.Context, k string) (o Outcome, waited bool, token any) {
	g.mu.Lock()
	s := g.keys[k]
	if s == nil {
		s = &key{}
		g.keys[k] = s
	}
	if s.running < g.limit && len(s.waiting) == 0 {
		s.running++
		g.mu.Unlock()
		return In, false, nil
	}
	if len(s.waiting) >= g.line {
		g.mu.Unlock()
		return Full, false, nil
	}
	w := &waiter{in: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	g.mu.Unlock()

	select {
	case <-w.in:
		return In, true, w.token
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.in:
		return In, true, w.token // let in as ctx ended
	default:
		s.waiting = removeWaiter(s.waiting, w)
		g.forgetIfIdle(k, s)
	}
	return GaveUp, true, nil
}

// Leave ends a message of key k that Enter let in: its place, with token,
// goes to the first in line, if any. It reports whether it did; if not,
// the token is the caller's to dispose of.
func (g *Gate) Leave(k string, token any) (handedOn bool) { return g.LeaveOr(k, token, nil) }

// LeaveOr is Leave, and calls kept, if not nil, when the place is not
// handed on, before the key is free to anyone else: what the caller then
// does with the token (a release of a lease) has begun by the time the
// next message of the key enters.
func (g *Gate) LeaveOr(k string, token any, kept func()) (handedOn bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.keys[k]
	if s == nil || s.running == 0 {
		panic("keygate: Leave of a key not entered")
	}
	if len(s.waiting) > 0 {
		// Handed on, not given back: no later comer can pass the line.
		w := s.waiting[0]
		s.waiting[0] = nil
		s.waiting = s.waiting[1:]
		w.token = token
		close(w.in)
		return true
	}
	if kept != nil {
		kept()
	}
	s.running--
	g.forgetIfIdle(k, s)
	return false
}

func (g *Gate) forgetIfIdle(k string, s *key) {
	if s.running == 0 && len(s.waiting) == 0 {
		delete(g.keys, k)
	}
}

func removeWaiter(line []*waiter, w *waiter) []*waiter {
	for i, x := range line {
		if x == w {
			return append(line[:i], line[i+1:]...)
		}
	}
	return line
}

// Counts are how many keys have a message running or waiting, and how
// many messages wait.
func (g *Gate) Counts() (keys, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.keys {
		waiting += len(s.waiting)
	}
	return len(g.keys), waiting
}

// TryEnter lets a message of key k in if it can go in at once, without
// waiting; Leave must follow a true.
func (g *Gate) TryEnter(k string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.keys[k]
	if s == nil {
		g.keys[k] = &key{running: 1}
		return true
	}
	if s.running < g.limit && len(s.waiting) == 0 {
		s.running++
		return true
	}
	return false
}
